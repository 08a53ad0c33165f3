"""How big an agent's context is, for compaction to decide on."""

from agents.compaction import context_tokens


def test_without_the_services_count_the_estimate_of_the_whole_is_the_size():
    assert context_tokens(estimate=7_500) == 7_500


def test_the_services_count_decides_and_only_what_changed_since_is_estimated():
    # The service counted 9,000 tokens for a request estimated at 6,000; 1,200
    # estimated tokens were added since: its tokenizer, not ours, measures the window.
    assert context_tokens(estimate=7_200, reported=9_000, reported_estimate=6_000) == 10_200
    # A tokenizer that spends less than a token on a Han character leaves more room than the estimate would.
    assert context_tokens(estimate=7_200, reported=4_000, reported_estimate=6_000) == 5_200
