"""fabric-lab as a pytest plugin: deploy a lab per module, inject faults, measure flows.

```python
import pytest

@pytest.fixture(scope="module")
def topology():
    return "topologies/fpf-mini.yml"      # or a LabPlan, e.g. plan_from(path, name="mytest")

def test_plane_failover(lab, faults, traffic):
    result = traffic.flow("host1", "host3", count=6000,
                          actions=[(1.0, "plane 3 down", lambda: faults.plane_down(3))])
    assert result.outage_ms < 300
```
Every fault is undone after the test (even a failed one) and the lab is back to converged
before the next test; each fault's outage and loss are attached to the JUnit report and to
reports/fault-results.json.
"""

from harness.testing.plans import plan_from

__all__ = ["plan_from"]
