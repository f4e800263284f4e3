"""Ranking: `ranking_options` and `max_num_results` checked as OpenAI's, and weighted reciprocal rank fusion with
scores in [0, 1]."""

from __future__ import annotations

import pytest
from openai.types.responses.file_search_tool import RankingOptions

from vllm_responses.protocol.errors import InvalidRequest
from vllm_responses.retrieval.ranking import (
    RRF_K,
    Ranking,
    fuse,
    parse_max_num_results,
    parse_ranking_options,
)


def test_defaults_and_parsing() -> None:
    assert parse_ranking_options(None) == Ranking("auto", 0.0, 1.0, 1.0)
    spec = {
        "ranker": "default-2024-11-15",
        "score_threshold": 0.4,
        "hybrid_search": {"embedding_weight": 3, "text_weight": 1},
    }
    RankingOptions.model_validate(spec)  # the SDK's shape
    assert parse_ranking_options(spec) == Ranking("default-2024-11-15", 0.4, 3.0, 1.0)
    assert parse_ranking_options({"ranker": "none"}).fused is False
    assert parse_ranking_options({"ranker": None, "score_threshold": None}) == Ranking()
    assert (
        parse_max_num_results(None) == 10
        and parse_max_num_results(50) == 50
        and parse_max_num_results(1) == 1
    )


@pytest.mark.parametrize(
    ("value", "param", "code"),
    [
        ([], "ranking_options", "invalid_type"),
        ({"ranker": "best"}, "ranking_options.ranker", "invalid_value"),
        ({"score_threshold": 1.5}, "ranking_options.score_threshold", "decimal_above_max_value"),
        ({"score_threshold": -0.1}, "ranking_options.score_threshold", "decimal_below_min_value"),
        ({"score_threshold": "0.5"}, "ranking_options.score_threshold", "invalid_type"),
        ({"hybrid_search": 1}, "ranking_options.hybrid_search", "invalid_type"),
        (
            {"hybrid_search": {"text_weight": 1}},
            "ranking_options.hybrid_search.embedding_weight",
            "missing_required_parameter",
        ),
        (
            {"hybrid_search": {"embedding_weight": 1, "text_weight": -1}},
            "ranking_options.hybrid_search.text_weight",
            "decimal_below_min_value",
        ),
        (
            {"hybrid_search": {"embedding_weight": 0, "text_weight": 0}},
            "ranking_options.hybrid_search",
            "invalid_value",
        ),
    ],
)
def test_bad_ranking_options_name_the_param(value: object, param: str, code: str) -> None:
    with pytest.raises(InvalidRequest) as err:
        parse_ranking_options(value)
    assert (err.value.param, err.value.code, err.value.status) == (param, code, 400), err.value.message


def test_a_caller_may_serve_fewer_rankers() -> None:
    """The `file_search` tool's `ranker` has no `none`."""
    with pytest.raises(InvalidRequest) as err:
        parse_ranking_options({"ranker": "none"}, "tools[0].ranking_options", ("auto", "default-2024-11-15"))
    assert err.value.param == "tools[0].ranking_options.ranker"


@pytest.mark.parametrize(
    ("value", "code"),
    [
        (0, "integer_below_min_value"),
        (51, "integer_above_max_value"),
        (2.0, "invalid_type"),
        (True, "invalid_type"),
    ],
)
def test_bad_max_num_results(value: object, code: str) -> None:
    with pytest.raises(InvalidRequest) as err:
        parse_max_num_results(value)
    assert (err.value.param, err.value.code) == ("max_num_results", code)


def test_rrf_order_and_scores() -> None:
    fused = fuse([1, 2, 3], [3, 4, 1], Ranking())
    scores = dict(fused)
    best = 2 / (RRF_K + 1)
    assert scores[1] == pytest.approx((1 / (RRF_K + 1) + 1 / (RRF_K + 3)) / best)
    assert scores[3] == pytest.approx((1 / (RRF_K + 3) + 1 / (RRF_K + 1)) / best)
    assert scores[4] == pytest.approx((1 / (RRF_K + 2)) / best)
    assert [c for c, _ in fused] == [1, 3, 2, 4]  # 1 and 3 tie: the vector list's order
    assert fuse([7], [7], Ranking()) == [(7, 1.0)]  # first in both lists: 1
    assert all(0 <= s <= 1 for _, s in fuse(list(range(100)), list(range(99, -1, -1)), Ranking()))


def test_weights_tilt_the_fusion() -> None:
    vector, text = [1, 2], [2, 1]
    assert [c for c, _ in fuse(vector, text, Ranking(embedding_weight=2.0, text_weight=1.0))] == [1, 2]
    assert [c for c, _ in fuse(vector, text, Ranking(embedding_weight=1.0, text_weight=2.0))] == [2, 1]
    only_text = fuse(vector, text, Ranking(embedding_weight=0.0, text_weight=1.0))
    assert only_text == [(2, 1.0), (1, pytest.approx((RRF_K + 1) / (RRF_K + 2)))]
    one_sided = dict(fuse([1], [2], Ranking(embedding_weight=3.0, text_weight=1.0)))
    assert one_sided == {1: pytest.approx(0.75), 2: pytest.approx(0.25)}  # each list's share of the weights
