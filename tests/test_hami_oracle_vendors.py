"""hami_fast against HAMi v2.10.0's own code on clusters of every vendor, one vendor at a time.

Each case is a random cluster whose nodes register one vendor family exactly as its device plugin
does, some beside a partner family, and a pod asking that family (tests/hamigen/vendors.py; the
keys and formats with HAMi's file:line are in tests/hamigen/vendor_specs.py). Both sides start from
HAMi's chart device config with Ascend and Iluvatar enabled (tests/hamigen/vendor_oracle.py). The
comparison is test_hami_oracle's: admission, verdict, node among HAMi's best, reasons, float32
scores, every backend's device annotations and extras on the chosen node, and every backend's
devices on every node that fits.

`SUPPORTED` names the families hami_fast schedules; a partner family on a node is drawn from them
only, so a supported family's test involves no other vendor. The others run too, as
`xfail(strict=False)`: HAMI_ORACLE_VENDORS=all runs every family as a plain test (partners drawn from
every family), and HAMI_ORACLE_VENDORS=hygon,amd adds those families to `SUPPORTED` for one run.

HAMI_ORACLE_VENDOR_BATCHES batches of HAMI_ORACLE_BATCH cases per family (CI: 50 x 8); seeded as
test_hami_oracle is (HAMI_ORACLE_SEED=random explores).
"""

from __future__ import annotations

import os

import pytest
from hamigen import oracle, seeding
from hamigen.vendor_oracle import CHART_CONFIG, SKIP_REASON, prepared
from hamigen.vendor_specs import VENDORS
from hamigen.vendors import vendor_cases
from hypothesis import given
from hypothesis import strategies as st
from test_hami_oracle import check_batch

pytestmark = [
    pytest.mark.skipif(oracle.find_oracle() is None, reason=oracle.SKIP_REASON),
    pytest.mark.skipif(not CHART_CONFIG.exists(), reason=SKIP_REASON),
    pytest.mark.filterwarnings("ignore:Generating overly large repr"),
]

# The vendor families hami_fast schedules today; NVIDIA here runs under the chart's full config.
SUPPORTED: set[str] = {"nvidia"}

BATCH = int(os.environ.get("HAMI_ORACLE_BATCH", "8"))
BATCHES = int(os.environ.get("HAMI_ORACLE_VENDOR_BATCHES", "50"))


def enabled() -> set[str]:
    """SUPPORTED, widened by HAMI_ORACLE_VENDORS (`all` or a comma list of families)."""
    wanted = os.environ.get("HAMI_ORACLE_VENDORS", "").strip()
    if wanted == "all":
        return set(VENDORS)
    extra = {v.strip() for v in wanted.split(",") if v.strip()}
    unknown = extra - set(VENDORS)
    if unknown:
        raise pytest.UsageError(f"HAMI_ORACLE_VENDORS: unknown vendor {sorted(unknown)}; known: {', '.join(VENDORS)}")
    return SUPPORTED | extra


ENABLED = enabled()
PARTNERS = tuple(v for v in VENDORS if v in ENABLED)


def family_param(family: str):
    if family in ENABLED:
        return pytest.param(family, id=family)
    mark = pytest.mark.xfail(reason=f"hami-fast does not schedule {family} yet", strict=False)
    return pytest.param(family, id=family, marks=mark)


def batches(family: str) -> st.SearchStrategy:
    partners = PARTNERS if family in ENABLED else VENDORS
    return st.lists(vendor_cases(family, partners).map(prepared), min_size=BATCH, max_size=BATCH)


@pytest.mark.parametrize("family", [family_param(f) for f in VENDORS])
def test_vendor_clusters_match_hami(family):
    @seeding.seeded_batches(BATCHES)
    @given(batches(family))
    def run(batch):
        check_batch(batch)

    run()
