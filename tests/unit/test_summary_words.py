"""The word budget of a summary on its own: a summary over Summary Word Budget is clipped, marked with an ellipsis."""

from __future__ import annotations

from langflow_summarizing_agent.engine.prompt import clip_words


def test_summary_is_clipped_to_the_word_budget():
    clipped = clip_words("- " + " ".join(["word"] * 500), 300)
    assert len(clipped.split()) <= 301
    assert clipped.endswith("…")
