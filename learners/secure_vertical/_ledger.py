"""What a run opens to whom: the leakage ledger of spec §6 (``secure-multiparty-logistic.md``).

Every backend writes one :class:`Opening` per value it reveals. The leakage tests
(spec §10 V9) compare the ledger of a mode and reveal level with the rows of §6, and
check that MPC mode at R2/E2 opens no array with a dimension of size ``n``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Opening:
    """One revealed quantity.

    Attributes
    ----------
    label : str
        What it is (``"I"``, ``"g"``, ``"eta"``, ``"beta"``, ``"converged"``, ...).
    shape : tuple of int
        Its shape (``()`` for a scalar or a bit).
    to : tuple of str
        Who learns it (``"all"`` or party names such as ``"A1"``).
    iteration : int or None
        Newton/EM iteration, ``None`` for one-off openings.
    row : int or None
        The row of the leakage table (§6) the opening belongs to.
    """

    label: str
    shape: tuple[int, ...]
    to: tuple[str, ...] = ("all",)
    iteration: int | None = None
    row: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return {
            "label": self.label,
            "shape": list(self.shape),
            "to": list(self.to),
            "iteration": self.iteration,
            "row": self.row,
        }


@dataclass(slots=True)
class Ledger:
    """Append-only list of :class:`Opening` (one per revealed quantity)."""

    openings: list[Opening] = field(default_factory=list)

    def record(
        self,
        label: str,
        shape: tuple[int, ...],
        *,
        to: tuple[str, ...] = ("all",),
        iteration: int | None = None,
        row: int | None = None,
    ) -> None:
        """Append one opening."""
        self.openings.append(
            Opening(label, tuple(int(s) for s in shape), to, iteration, row)
        )

    def labels(self) -> set[str]:
        """The distinct labels opened."""
        return {o.label for o in self.openings}

    def rows(self) -> set[int]:
        """The leakage-table rows (§6) that applied."""
        return {o.row for o in self.openings if o.row is not None}

    def opens_dimension(self, size: int) -> bool:
        """Whether any opened array has an axis of length ``size`` (V9: ``size = n``)."""
        return any(size in o.shape for o in self.openings)

    def summary(self) -> list[dict[str, Any]]:
        """Distinct ``(label, shape, to, row)`` with the number of times opened."""
        counts: dict[tuple[Any, ...], int] = {}
        for o in self.openings:
            key = (o.label, o.shape, o.to, o.row)
            counts[key] = counts.get(key, 0) + 1
        return [
            {
                "label": k[0],
                "shape": list(k[1]),
                "to": list(k[2]),
                "row": k[3],
                "times": c,
            }
            for k, c in counts.items()
        ]

    def extend(self, items: list[dict[str, Any]]) -> None:
        """Append openings given as :meth:`Opening.to_dict` dictionaries."""
        for d in items:
            self.record(
                d["label"],
                tuple(d["shape"]),
                to=tuple(d["to"]),
                iteration=d.get("iteration"),
                row=d.get("row"),
            )
