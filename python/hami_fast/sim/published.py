"""Published results of the FGD paper's simulator (Weng et al., USENIX ATC '23).

Unallocated GPU % at arrived = 100 % of capacity, mean over seeds 42–51, from the simulator's
cached ``expected_results/analysis_allo_discrete.csv`` (the artifact of the paper).
``gpushare20`` is not part of the published run script.
"""

from __future__ import annotations

POLICY_ORDER = ["random", "dotprod", "clustering", "packing", "bestfit", "fgd"]

UNALLOCATED_AT_100: dict[str, dict[str, float]] = {
    "default": {"random": 13.70, "dotprod": 9.38, "clustering": 8.35, "packing": 8.22, "bestfit": 7.14, "fgd": 4.77},
    "gpushare40": {
        "random": 15.14,
        "dotprod": 10.70,
        "clustering": 10.24,
        "packing": 10.23,
        "bestfit": 8.56,
        "fgd": 6.04,
    },
    "gpushare60": {
        "random": 17.19,
        "dotprod": 13.18,
        "clustering": 13.10,
        "packing": 12.85,
        "bestfit": 10.94,
        "fgd": 8.75,
    },
    "gpushare80": {
        "random": 19.38,
        "dotprod": 15.86,
        "clustering": 15.50,
        "packing": 15.35,
        "bestfit": 13.34,
        "fgd": 10.92,
    },
    "gpushare100": {
        "random": 21.10,
        "dotprod": 18.02,
        "clustering": 17.78,
        "packing": 17.87,
        "bestfit": 15.38,
        "fgd": 13.36,
    },
    "multigpu20": {"random": 13.08, "dotprod": 8.15, "clustering": 6.66, "packing": 6.50, "bestfit": 6.27, "fgd": 4.47},
    "multigpu30": {"random": 13.37, "dotprod": 6.89, "clustering": 5.45, "packing": 5.30, "bestfit": 5.43, "fgd": 3.64},
    "multigpu40": {"random": 14.62, "dotprod": 5.96, "clustering": 4.65, "packing": 4.41, "bestfit": 4.90, "fgd": 3.09},
    "multigpu50": {"random": 18.72, "dotprod": 5.27, "clustering": 4.31, "packing": 3.94, "bestfit": 4.38, "fgd": 2.91},
}

# Fig. 9(a) medians on default: unallocated % at arrived 100 / 110 / 120 / 130.
DEFAULT_MEDIAN_BY_ARRIVED: dict[str, dict[int, float]] = {
    "random": {100: 13.75, 110: 13.23, 120: 12.84, 130: 12.62},
    "dotprod": {100: 9.45, 110: 9.37, 120: 9.29, 130: 9.20},
    "clustering": {100: 8.42, 110: 8.34, 120: 8.27, 130: 8.21},
    "packing": {100: 8.20, 110: 8.12, 120: 8.05, 130: 7.94},
    "bestfit": {100: 7.09, 110: 7.02, 120: 6.96, 130: 6.89},
    "fgd": {100: 4.77, 110: 4.68, 120: 4.63, 130: 4.60},
}

# Fig. 7 medians on default: fragment as % of all GPUs at arrived 50 / 80 / 90 / 100 / 130.
DEFAULT_FRAG_MEDIAN: dict[str, dict[int, float]] = {
    "random": {50: 15.00, 80: 15.89, 90: 14.49, 100: 13.56, 130: 12.50},
    "dotprod": {50: 12.07, 80: 10.14, 90: 9.45, 100: 9.34, 130: 9.11},
    "clustering": {50: 12.12, 80: 9.34, 90: 8.46, 100: 8.28, 130: 8.05},
    "packing": {50: 11.98, 80: 9.22, 90: 8.33, 100: 8.12, 130: 7.90},
    "bestfit": {50: 10.81, 80: 8.21, 90: 7.35, 100: 7.02, 130: 6.82},
    "fgd": {50: 8.95, 80: 5.97, 90: 5.01, 100: 4.73, 130: 4.56},
}

# The policies whose fidelity target is ±0.5 pp (Random depends on nondeterministic node order).
FIDELITY_POLICIES = ["fgd", "bestfit", "packing", "clustering", "dotprod"]
FIDELITY_BOUND_PP = 0.5
