"""User-level LDP sparse linear regression, 2-SLR and M-SLR (spec
``uldp-sparse-linear-regression.md``).

Facade of the subpackage (the modules starting with ``_`` are internal):

- the estimator :class:`ULDPSparseLinearRegression` (registered as
  ``uldp_sparse_linear``);
- the users' side (elementwise over users, each on its own data, the broadcast state
  and its own coins): :func:`one_bit_randomizer`, :func:`heavy_hitter_randomizer`,
  :func:`hashed_heavy_hitter_randomizer`, :func:`bin_randomizer`,
  :func:`laplace_randomizer`, with :func:`keep_probability`,
  :func:`debias_factor`, :func:`bit_weight`;
- the messages :class:`BitMessages` / :class:`ValueMessages` and the curator's side,
  which reads messages only: :func:`frequency_oracle`,
  :func:`hashed_frequency_oracle` (with the public :class:`PrefixHashes`,
  :func:`hash_constants`, :func:`prefix_key`), :func:`locate_bins`,
  :func:`weighted_means`, :func:`laplace_weights`, :func:`curate_tree`;
- the protocols :func:`heavy_hitters` (with :func:`exact_heavy_hitters`,
  :func:`prune`, :func:`tree_depth`, :func:`assign_levels`, :func:`first_pruned_level`) and :func:`uldp_mean`;
- the per-user :class:`PrivacyLedger`; :func:`hadamard_entry`;
- the paper's synthetic design and experiment loop (:func:`independent_design`,
  :func:`run_setting`, :func:`grid`, :func:`multi_round_grid`, :func:`f1_score`, :func:`local_lasso_l2`).
"""

from learners.uldp_sparse._curator import (
    frequency_oracle,
    hashed_frequency_oracle,
    laplace_weights,
    locate_bins,
    weighted_means,
)
from learners.uldp_sparse._estimator import ULDPSparseLinearRegression
from learners.uldp_sparse._hadamard import hadamard_entry
from learners.uldp_sparse._heavy_hitter import (
    MAX_TREE_DEPTH,
    HeavyHitterResult,
    assign_levels,
    curate_tree,
    exact_heavy_hitters,
    first_pruned_level,
    heavy_hitters,
    prune,
    tree_depth,
)
from learners.uldp_sparse._ledger import PrivacyLedger
from learners.uldp_sparse._mean import MeanResult, padded_dimension, uldp_mean
from learners.uldp_sparse._messages import BitMessages, ValueMessages
from learners.uldp_sparse._prefix_hash import PrefixHashes, hash_constants, prefix_key
from learners.uldp_sparse._randomizers import (
    bin_randomizer,
    bit_weight,
    debias_factor,
    hashed_heavy_hitter_randomizer,
    heavy_hitter_randomizer,
    keep_probability,
    laplace_randomizer,
    one_bit_randomizer,
    tree_prefix,
)
from learners.uldp_sparse._simulation import (
    ZERO_ESTIMATOR_L2,
    Design,
    SettingResult,
    f1_score,
    grid,
    independent_design,
    local_lasso_l2,
    multi_round_grid,
    run_setting,
)

__all__ = [
    "MAX_TREE_DEPTH",
    "ZERO_ESTIMATOR_L2",
    "BitMessages",
    "Design",
    "HeavyHitterResult",
    "MeanResult",
    "PrefixHashes",
    "PrivacyLedger",
    "SettingResult",
    "ULDPSparseLinearRegression",
    "ValueMessages",
    "assign_levels",
    "bin_randomizer",
    "bit_weight",
    "curate_tree",
    "debias_factor",
    "exact_heavy_hitters",
    "f1_score",
    "first_pruned_level",
    "frequency_oracle",
    "grid",
    "hadamard_entry",
    "hash_constants",
    "hashed_frequency_oracle",
    "hashed_heavy_hitter_randomizer",
    "heavy_hitter_randomizer",
    "heavy_hitters",
    "independent_design",
    "keep_probability",
    "laplace_randomizer",
    "laplace_weights",
    "local_lasso_l2",
    "locate_bins",
    "multi_round_grid",
    "one_bit_randomizer",
    "padded_dimension",
    "prefix_key",
    "prune",
    "run_setting",
    "tree_depth",
    "tree_prefix",
    "uldp_mean",
    "weighted_means",
]
