"""`crux.testing`: test your own prompts, tools and hooks against the real runtime.

Two parts, both usable without a network or a provider key:

- **Test models**, served by your worker and addressed by their model id `test:<name>`:
  `ScriptedModel([...])` answers each provider call with the next step of its script (reply
  text, a `Reply` with structured `output`, a `ToolCall`, or a `Fault` such as
  `Fault.http(529)`), and `FunctionModel(fn)` asks your function of the `ModelRequest`.
  Register them with `crux.Worker(models=[model])`; both record what they were sent
  (`model.requests`).
- **The embedded stack**: `embedded_stack()` starts a Temporal dev server and PostgreSQL
  (a few seconds, on loopback, free ports) and `serve(worker, stack)` runs your
  `crux.Worker` on a fresh task queue and database and yields a ready `crux.Runtime`. The
  pytest plugin `crux.testing.pytest_plugin` wraps both as fixtures (`crux_stack`,
  `crux_worker`, `crux_runtime`).

```python
# conftest.py
pytest_plugins = ["crux.testing.pytest_plugin"]

@pytest.fixture
def crux_worker():
    return crux.Worker(tools=[get_weather], models=[MODEL])

# test_weather.py
async def test_the_tool_result_reaches_the_model(crux_runtime):
    result = await crux_runtime.generate(prompt, input="Rain?", model=MODEL.id)
```
"""

from crux.testing._models import (
    PROVIDER,
    Fault,
    FunctionModel,
    ModelRequest,
    Reply,
    ScriptedModel,
    Step,
    ToolCall,
)
from crux.testing._stack import TestStack, embedded_stack, serve

__all__ = [
    "PROVIDER",
    "Fault",
    "FunctionModel",
    "ModelRequest",
    "Reply",
    "ScriptedModel",
    "Step",
    "TestStack",
    "ToolCall",
    "embedded_stack",
    "serve",
]
