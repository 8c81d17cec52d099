"""Weighted Reciprocal Rank Fusion and the search configuration, without a database."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from search.fusion import ListConfig, SearchConfig, rrf


def test_scores_are_weighted_reciprocal_ranks() -> None:
    fused = rrf(
        {"lexical": ["a", "b", "c"], "vector": ["c", "a"]},
        {"lexical": 1.0, "vector": 0.5},
        k=60,
    )
    scores = {doc: score for doc, score, _ in fused}
    assert scores["a"] == pytest.approx(1.0 / 61 + 0.5 / 62)
    assert scores["b"] == pytest.approx(1.0 / 62)
    assert scores["c"] == pytest.approx(1.0 / 63 + 0.5 / 61)
    assert [doc for doc, _, _ in fused] == ["a", "c", "b"]


def test_explain_ranks_are_one_based_per_list() -> None:
    fused = rrf({"lexical": ["a", "b"], "trigram": ["b"], "vector": ["c", "b"]})
    ranks = {doc: per_list for doc, _, per_list in fused}
    assert ranks == {
        "a": {"lexical": 1},
        "b": {"lexical": 2, "trigram": 1, "vector": 2},
        "c": {"vector": 1},
    }


def test_without_weights_every_list_weighs_one() -> None:
    fused = rrf({"x": ["a"], "y": ["b", "a"]}, k=0)
    assert fused[0] == ("a", pytest.approx(1.0 + 0.5), {"x": 1, "y": 2})
    assert fused[1] == ("b", pytest.approx(1.0), {"y": 1})


def test_lexical_weight_beats_vector_at_the_same_rank() -> None:
    config = SearchConfig()
    fused = rrf({"lexical": ["proper-noun"], "vector": ["vague"]}, config.weights, config.k)
    assert [doc for doc, _, _ in fused] == ["proper-noun", "vague"]


def test_k_flattens_the_curve() -> None:
    steep = rrf({"l": ["a", "b"]}, k=0)
    flat = rrf({"l": ["a", "b"]}, k=1000)
    assert steep[0][1] / steep[1][1] == pytest.approx(2.0)
    assert flat[0][1] / flat[1][1] == pytest.approx(1002 / 1001)


def test_a_duplicate_in_one_list_counts_once_at_its_best_rank() -> None:
    fused = rrf({"l": ["a", "b", "a"]}, k=0)
    assert fused == [("a", 1.0, {"l": 1}), ("b", 0.5, {"l": 2})]


def test_ties_go_to_more_lists_then_the_smaller_id() -> None:
    # 1/1 + 1/2 == 1/2 + 1/1 exactly (fsum), whatever the order of the terms
    fused = rrf({"x": ["b", "a"], "y": ["a", "b"], "z": ["c", "d"]}, k=0)
    assert [doc for doc, _, _ in fused] == ["a", "b", "c", "d"]
    assert fused[0][1] == fused[1][1] == 1.5
    # the same score, 1/2, from two lists (1/4 + 1/4) or from one: agreement first
    fused = rrf({"x": ["solo", "pad1", "duo"], "y": ["pad2", "pad3", "duo"]}, k=1)
    tied = [doc for doc, score, _ in fused if score == 0.5]
    assert tied == ["duo", "pad2", "solo"]
    assert [doc for doc, _, _ in fused][:3] == tied


def test_empty_input() -> None:
    assert rrf({}) == []
    assert rrf({"lexical": []}, {"lexical": 1.0}) == []


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="no weight for vector"):
        rrf({"lexical": ["a"], "vector": ["b"]}, {"lexical": 1.0})
    with pytest.raises(ValueError, match="negative weight"):
        rrf({"lexical": ["a"]}, {"lexical": -1.0})
    with pytest.raises(ValueError, match="k must be"):
        rrf({"lexical": ["a"]}, k=-1)


@given(
    st.dictionaries(
        st.sampled_from(["lexical", "trigram", "vector"]),
        st.lists(st.sampled_from("abcdefgh"), max_size=8),
    )
)
def test_fusion_is_deterministic_and_sorted(rankings: dict[str, list[str]]) -> None:
    weights = {"lexical": 1.0, "trigram": 0.7, "vector": 0.5}
    fused = rrf(rankings, weights)
    again = rrf(dict(reversed(list(rankings.items()))), weights)
    assert [row[0] for row in fused] == [row[0] for row in again]
    assert {doc for doc, _, _ in fused} == {d for ids in rankings.values() for d in ids}
    assert all(a[1] >= b[1] for a, b in zip(fused, fused[1:], strict=False))
    for doc, _, ranks in fused:
        for name, rank in ranks.items():
            assert rankings[name].index(doc) + 1 == rank


def test_default_config_weights_lexical_over_trigram_over_vector() -> None:
    config = SearchConfig()
    assert config.weights == {"lexical": 1.0, "trigram": 0.7, "vector": 0.5}
    assert config.k == 60
    assert config.lexical.limit == config.trigram.limit == config.vector.limit == 50


def test_config_is_validated_and_frozen() -> None:
    with pytest.raises(ValidationError):
        ListConfig(weight=-0.1)
    with pytest.raises(ValidationError):
        SearchConfig(k=-1)
    with pytest.raises(ValidationError):
        SearchConfig(lexcal=ListConfig(weight=1.0))  # type: ignore[call-arg]
    config = SearchConfig()
    with pytest.raises(ValidationError):
        config.k = 10  # type: ignore[misc]


def test_fuse_cuts_each_list_to_its_limit_and_the_result_to_limit() -> None:
    config = SearchConfig(
        lexical=ListConfig(weight=1.0, limit=2),
        vector=ListConfig(weight=0.5, limit=0),  # switched off
        limit=3,
    )
    assert list(config.lists()) == ["lexical", "trigram"]
    fused = config.fuse({"lexical": ["a", "b", "c"], "trigram": ["c", "d"], "vector": ["z"]})
    assert [doc for doc, _, _ in fused] == ["a", "b", "c"]  # "d" falls to the result limit
    assert fused[2][2] == {"trigram": 1}  # "c" was cut from lexical (limit 2)


def test_fuse_rejects_an_unknown_list() -> None:
    with pytest.raises(ValueError, match="unknown candidate list lexcal"):
        SearchConfig().fuse({"lexcal": ["a"]})
