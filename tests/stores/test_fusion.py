"""The two ways hybrid search merges its dense and keyword lists (`memoryscope.stores.fusion`)."""

from __future__ import annotations

import pytest

from memoryscope.stores.fusion import fuse, reciprocal_rank_fusion, score_fusion


def test_score_fusion_scales_each_list_to_0_1_and_weighs_it() -> None:
    dense = [("a", 0.9), ("b", 0.5), ("c", 0.1)]  # scaled 1, 0.5, 0
    keyword = [("c", 12.0), ("d", 2.0)]  # scaled 1, 0; weighted 0.5
    assert score_fusion([dense, keyword], [1.0, 0.5]) == [
        ("a", pytest.approx(1.0)),
        ("b", pytest.approx(0.5)),
        ("c", pytest.approx(0.5)),
        ("d", pytest.approx(0.0)),
    ]


def test_score_fusion_keeps_margins_that_ranks_lose() -> None:
    # "a" leads the dense list by far and trails the keyword list by a hair; "b" is the reverse
    dense = [("a", 0.95), ("b", 0.30), ("c", 0.29), ("d", 0.28)]
    keyword = [("b", 5.0), ("c", 4.99), ("a", 4.98), ("d", 1.0)]
    assert score_fusion([dense, keyword])[0][0] == "a"
    assert reciprocal_rank_fusion([[item for item, _ in dense], [item for item, _ in keyword]])[0][0] == "b"


def test_a_list_whose_items_all_score_the_same_gives_each_full_marks() -> None:
    assert score_fusion([[("a", 0.3)], [("b", 7.0), ("c", 7.0)]]) == [("a", 1.0), ("b", 1.0), ("c", 1.0)]


def test_score_fusion_counts_a_repeated_id_at_its_best_score_and_skips_empty_lists() -> None:
    assert score_fusion([[("a", 1.0), ("b", 0.0), ("a", 0.2)], []]) == [("a", 1.0), ("b", 0.0)]


def test_fuse_picks_the_method_by_name_and_names_the_choices_otherwise() -> None:
    lists = [[("a", 0.9), ("b", 0.8)], [("b", 3.0)]]
    assert fuse("scores", lists, [1.0, 1.0]) == score_fusion(lists, [1.0, 1.0])
    assert fuse("rrf", lists) == reciprocal_rank_fusion([["a", "b"], ["b"]])
    with pytest.raises(ValueError, match=r"'borda'.*rrf, scores"):
        fuse("borda", lists)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="1 weights for 2 ranked lists"):
        score_fusion(lists, [1.0])
