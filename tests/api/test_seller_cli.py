"""``privmarket seller serve``'s CSV reader: the market's features then ``y``; an empty
cell is missing; bad files are refused naming the row and column."""

from pathlib import Path

import numpy as np
import pytest
import typer

from api.cli_seller import read_records


def test_reads_features_then_y_with_empty_cells_missing(tmp_path: Path) -> None:
    f = tmp_path / "mine.csv"
    f.write_text("a,b,y\n1.5,,1\n,-2.25,-1\n")
    X, y = read_records(f, ["a", "b"])
    assert X.shape == (2, 2)
    assert X[0, 0] == 1.5
    assert np.isnan(X[0, 1])
    assert np.isnan(X[1, 0])
    assert X[1, 1] == -2.25
    assert y.tolist() == [1.0, -1.0]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("b,a,y\n1,2,3\n", "header"),
        ("a,b\n1,2\n", "header"),
        ("a,b,y\n1,x,3\n", "row 2, column 'b'"),
        ("a,b,y\n1,2\n", "row 2 has 2 cells"),
        ("a,b,y\n1,2,\n", "every record needs y"),
        ("a,b,y\n", "no record"),
    ],
)
def test_bad_files_are_refused_naming_what(
    tmp_path: Path, text: str, needle: str
) -> None:
    f = tmp_path / "mine.csv"
    f.write_text(text)
    with pytest.raises(typer.BadParameter, match=needle):
        read_records(f, ["a", "b"])
