"""The sim area: `hami-fast simulate` and the trace replay, the node policies derived from the
simulator, and the planner (`hami-fast plan`). Trace files come from tests/openb_trace.py, objects
from tests/k8s_objects.py; no fixture is shared by its modules yet."""
