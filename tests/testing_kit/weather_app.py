"""A small application built on Crux, as a user would write it (public API only).

It is what `tests/testing_kit` tests with `crux.testing`, the way a user tests their own
code: a tool, a prompt that offers it, a step hook, and the worker that registers them.
"""

from __future__ import annotations

import crux


@crux.tool
def get_weather(city: str) -> dict[str, object]:
    """Tomorrow's forecast for a city.

    Args:
        city: City name, in English.
    """
    return {"city": city, "sky": "rain", "high_c": 12}


@crux.step_hook("short-after-tools")
def short_after_tools(step: crux.StepContext) -> crux.StepOverrides | None:
    """After a tool round, keep the answer short."""
    if step.reason == "tool-round":
        return crux.StepOverrides(max_output_tokens=64)
    return None


def forecaster(thread_id: str) -> crux.Agent:
    """The agent answering weather questions on a Thread."""
    return crux.agent(
        id="forecaster",
        prompt=crux.prompt(
            id="forecast",
            system="You answer weather questions with the get_weather tool.",
            use=[crux.thread(id=thread_id), crux.history.recent(messages=10), get_weather],
        ),
        prepare_step=short_after_tools,
    )


REGISTRATIONS = crux.Registrations(tools=[get_weather], hooks=[short_after_tools])
"""What the application's workers register."""

worker = crux.Worker(registrations=REGISTRATIONS)
"""The application's worker: `crux dev --app weather_app:worker` serves it."""
