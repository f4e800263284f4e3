"""How a search's two ranked lists become one: `Ranking` (`ranking_options` and `max_num_results`, read and
checked as OpenAI's) and `fuse`, weighted reciprocal rank fusion with scores in [0, 1].

A chunk at rank r (1-based) of a list of weight w gets w / (K + r) from that list (K = 60); its fused value is
the sum over both lists, divided by the most a chunk can get, (w_embedding + w_text) / (K + 1), so a chunk first
in both lists scores 1 and one first in one list only scores that list's share of the weights. `ranker: "none"`
fuses nothing: the vector list's order, each chunk scored by its cosine similarity to the query (below 0: 0).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal, cast

from vllm_responses.protocol.errors import InvalidRequest

__all__ = [
    "DEFAULT_RANKING",
    "RRF_K",
    "Ranker",
    "Ranking",
    "fuse",
    "parse_max_num_results",
    "parse_ranking_options",
    "plan",
    "ranked",
]

RRF_K = 60
Ranker = Literal["auto", "default-2024-11-15", "none"]
_RANKERS: tuple[Ranker, ...] = ("auto", "default-2024-11-15", "none")


@dataclass(frozen=True)
class Ranking:
    """`ranking_options`: the ranker, the weights of each list in the fusion and the lowest score kept."""

    ranker: Ranker = "auto"
    score_threshold: float = 0.0
    embedding_weight: float = 1.0
    text_weight: float = 1.0

    @property
    def fused(self) -> bool:
        return self.ranker != "none"


DEFAULT_RANKING = Ranking()


def parse_ranking_options(
    value: object, param: str = "ranking_options", rankers: Sequence[Ranker] = _RANKERS
) -> Ranking:
    """`ranking_options` checked (absent or null: the defaults); `rankers` are the ones the caller serves (the
    `file_search` tool's has no `none`)."""
    if value is None:
        return Ranking()
    if not isinstance(value, Mapping):
        raise InvalidRequest(
            f"Invalid type for '{param}': expected an object.", param=param, code="invalid_type"
        )
    ranker = value.get("ranker")
    if ranker is None:
        ranker = "auto"
    if ranker not in rankers:
        supported = ", ".join(repr(r) for r in rankers)
        raise InvalidRequest(
            f"Invalid value for '{param}.ranker': {ranker!r}. Supported values are: {supported}.",
            param=f"{param}.ranker",
        )
    threshold = value.get("score_threshold")
    threshold = 0.0 if threshold is None else _number(threshold, f"{param}.score_threshold", 1.0)
    weights = _weights(value.get("hybrid_search"), f"{param}.hybrid_search")
    return Ranking(cast(Ranker, ranker), threshold, *weights)


def _weights(value: object, param: str) -> tuple[float, float]:
    if value is None:
        return 1.0, 1.0
    if not isinstance(value, Mapping):
        raise InvalidRequest(
            f"Invalid type for '{param}': expected an object.", param=param, code="invalid_type"
        )
    out = []
    for name in ("embedding_weight", "text_weight"):
        if value.get(name) is None:
            raise InvalidRequest(
                f"Missing required parameter: '{param}.{name}'.",
                param=f"{param}.{name}",
                code="missing_required_parameter",
            )
        out.append(_number(value[name], f"{param}.{name}", None))
    if out[0] + out[1] <= 0:
        raise InvalidRequest(
            f"Invalid '{param}': at least one of 'embedding_weight' and 'text_weight' must be above 0.",
            param=param,
        )
    return out[0], out[1]


def _number(value: object, param: str, high: float | None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidRequest(
            f"Invalid type for '{param}': expected a number.", param=param, code="invalid_type"
        )
    if value < 0:
        raise InvalidRequest(
            f"Invalid '{param}': number below minimum value. Expected a value >= 0, but got {value} instead.",
            param=param,
            code="decimal_below_min_value",
        )
    if high is not None and value > high:
        raise InvalidRequest(
            f"Invalid '{param}': number above maximum value. Expected a value <= {high:g}, but got {value} instead.",
            param=param,
            code="decimal_above_max_value",
        )
    return float(value)


def parse_max_num_results(value: object, param: str = "max_num_results", default: int = 10) -> int:
    """`max_num_results`: 1 to 50 (absent or null: `default`)."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRequest(
            f"Invalid type for '{param}': expected an integer.", param=param, code="invalid_type"
        )
    if not 1 <= value <= 50:
        side, sign, bound = ("below minimum", ">=", 1) if value < 1 else ("above maximum", "<=", 50)
        raise InvalidRequest(
            f"Invalid '{param}': integer {side} value. Expected a value {sign} {bound}, but got {value} instead.",
            param=param,
            code=f"integer_{side.split()[0]}_{'min' if value < 1 else 'max'}_value",
        )
    return value


def fuse(vector: Sequence[int], text: Sequence[int], ranking: Ranking) -> list[tuple[int, float]]:
    """The chunks of both ranked lists (best first), fused by weighted reciprocal rank: (chunk, score) best
    first, ties in the vector list's order, then the text list's."""
    total: dict[int, float] = {}
    for ids, weight in ((vector, ranking.embedding_weight), (text, ranking.text_weight)):
        if weight <= 0:
            continue
        for rank, chunk in enumerate(ids, start=1):
            total[chunk] = total.get(chunk, 0.0) + weight / (RRF_K + rank)
    best = (ranking.embedding_weight + ranking.text_weight) / (RRF_K + 1)
    order = sorted(total.items(), key=lambda kv: -kv[1])  # stable: first-seen order breaks ties
    return [(chunk, min(1.0, value / best)) for chunk, value in order]


def plan(ranking: Ranking, has_vector: bool) -> tuple[Ranking, bool, bool]:
    """The ranking a search runs (without a query vector: keywords alone) and which lists it needs: (ranking,
    by vector, by keywords)."""
    if not has_vector:
        ranking = replace(
            ranking, ranker="auto", embedding_weight=0.0, text_weight=ranking.text_weight or 1.0
        )
    by_vector = has_vector and (not ranking.fused or ranking.embedding_weight > 0)
    return ranking, by_vector, ranking.fused and ranking.text_weight > 0


def ranked(
    nearest: Sequence[tuple[int, float]], words: Sequence[int], ranking: Ranking, max_num_results: int
) -> list[tuple[int, float]]:
    """The search's results from its vector list (chunk, cosine similarity) and keyword list (chunks), both best
    first: fused (or, with ranker `none`, the vector list's similarities), none below the threshold, at most
    `max_num_results`."""
    if ranking.fused:
        scored = fuse([c for c, _ in nearest], words, ranking)
    else:
        scored = [(c, max(0.0, min(1.0, s))) for c, s in nearest]
    return [(c, s) for c, s in scored if s >= ranking.score_threshold][:max_num_results]
