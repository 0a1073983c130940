"""The one door between the market and the numerics (``mechanisms``, ``learners``).

Every call into the numerics goes through this package, so a signature change upstream
is fixed in one place, and no other market module imports ``mechanisms`` or
``learners``. It sits below the domain: it imports only the market's base modules
(settings, errors, the store's units). Numerics raise ``ValueError`` for bad input; the
helpers that validate client input turn that into :class:`market.errors.InvalidInputError`
naming the field. Split by concern:

- :mod:`market.numerics.learners`: the learner registry's adapter (specs, order checks,
  building and fitting a learner);
- :mod:`market.numerics.pricing`: priors, reported costs, release overheads and the
  mechanism's settings;
- :mod:`market.numerics.mechanism`: allocation, Myerson payments, ``γ`` for a budget,
  the trade-off curve and the audits;
- :mod:`market.numerics.executors`: where payments run (thread, process pool, Dask);
- :mod:`market.numerics.money`: the one money rule (:mod:`mechanisms.money`);
- :mod:`market.numerics.custody`: seller custody's local protocols (learners a
  seller-custody market takes, the rounds of report requests, report checks).

Callers use the facade (``from market import numerics``; ``numerics.allocate(...)``).
"""

from market.numerics import custody
from market.numerics.executors import (
    SERIAL_PAYMENTS_MAX,
    dask_executor,
    payments_executor,
)
from market.numerics.learners import (
    LearnerRelease,
    align_blocks,
    build_learner,
    check_order_learner,
    default_learner,
    finish_vertical_session,
    has_missable,
    learner_release,
    learner_spec,
    list_learners,
    market_refusal,
    records_per_seller_shortfall,
    release,
    release_vertical,
    replace_report,
    run_compute_party,
    vertical_session_plan,
    vertical_session_processes,
)
from market.numerics.mechanism import (
    FIRST_RUN_NOTE,
    SolverError,
    allocate,
    audit_incentives,
    audit_on_pool,
    choose_gamma,
    kernels_compiled,
    myerson_payments,
    payment_certificates,
    tradeoff,
)
from market.numerics.money import (
    MONEY_UNIT,
    individually_rational,
    individually_rational_all,
    payments_to_minor,
    privacy_cost,
    privacy_costs,
    to_major,
    to_minor,
)
from market.numerics.pricing import (
    CONFIG_KEYS,
    LOSS_BY_TASK,
    SETTING_RANGES,
    SMALLEST_ORDER,
    build_prior,
    check_prior,
    check_reported_cost,
    check_reported_costs,
    check_settings,
    cost_checker,
    gamma_choice_refusal,
    learner_config,
    mechanism_config,
    release_overhead_floor,
)

__all__ = [
    "CONFIG_KEYS",
    "FIRST_RUN_NOTE",
    "LOSS_BY_TASK",
    "MONEY_UNIT",
    "SERIAL_PAYMENTS_MAX",
    "SETTING_RANGES",
    "SMALLEST_ORDER",
    "LearnerRelease",
    "SolverError",
    "align_blocks",
    "allocate",
    "audit_incentives",
    "audit_on_pool",
    "build_learner",
    "build_prior",
    "check_order_learner",
    "check_prior",
    "check_reported_cost",
    "check_reported_costs",
    "check_settings",
    "choose_gamma",
    "cost_checker",
    "custody",
    "dask_executor",
    "default_learner",
    "finish_vertical_session",
    "gamma_choice_refusal",
    "has_missable",
    "individually_rational",
    "individually_rational_all",
    "kernels_compiled",
    "learner_config",
    "learner_release",
    "learner_spec",
    "list_learners",
    "market_refusal",
    "mechanism_config",
    "myerson_payments",
    "payment_certificates",
    "payments_executor",
    "payments_to_minor",
    "privacy_cost",
    "privacy_costs",
    "records_per_seller_shortfall",
    "release",
    "release_overhead_floor",
    "release_vertical",
    "replace_report",
    "run_compute_party",
    "to_major",
    "to_minor",
    "tradeoff",
    "vertical_session_plan",
    "vertical_session_processes",
]
