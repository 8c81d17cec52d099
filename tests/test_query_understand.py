"""Query understanding and the ranking arithmetic, pure: no database."""

from __future__ import annotations

from datetime import datetime, timedelta

from core.textsearch import index_tokens
from search import rank
from search.understand import asks_decision, content_terms, focus_of, understand

NOW = datetime.fromisoformat("2025-02-15T12:00:00+09:00")


def words(text: str) -> list[str]:
    return [t.text for t in content_terms(text)]


def test_japanese_question_words_particles_and_auxiliaries_are_not_terms():
    assert words("丹沢のとき結局どうするって決めたんだっけ") == ["丹沢", "結局", "決め"]
    assert words("なんで公設の学童にしようと思ったんだっけ") == ["公設", "学童", "思っ"]
    for w in ("何", "どう", "だっけ", "の", "って", "する", "た"):
        assert w not in words("何をどうするって決めたんだっけ")


def test_japanese_verbs_match_by_their_dictionary_form():
    (term,) = [t for t in content_terms("ノートPCを買った") if t.text == "買っ"]
    assert term.lexemes[0] == "買う"
    assert "買う" in index_tokens("結局MacBookを買いました")  # the index holds the same form
    decided = [t for t in content_terms("決めた") if t.text == "決め"][0]
    assert "決める" in decided.lexemes and "決め" in decided.lexemes


def test_katakana_variants_share_one_form():
    assert "サーバー" in index_tokens("サーバの移行")  # サーバ is indexed as サーバー too
    term = content_terms("サーバ")[0]
    assert "サーバー" in term.lexemes
    for text in ("サーバの移行", "ｻｰﾊﾞｰの移行", "サーバーの移行"):
        assert rank.matches(term.lexemes, term.prefix, set(index_tokens(text)))


def test_english_stop_words_go_and_stems_match_as_prefixes():
    terms = {t.text: t for t in content_terms("What did I end up deciding about the laptops?")}
    assert set(terms) == {"deciding", "laptops"}
    assert terms["deciding"].lexemes == ("decid",) and terms["deciding"].prefix == (True,)
    assert terms["laptops"].lexemes == ("laptop",)
    postgres = content_terms("Postgres")[0]
    assert rank.matches(
        postgres.lexemes, postgres.prefix, set(index_tokens("We moved to PostgreSQL"))
    )
    assert "decid" in index_tokens("I decided to stay")  # the stem is indexed beside the word


def test_mixed_language_terms():
    assert set(words("yamalogのDB、SQLiteからPostgresに移したのってなんでだっけ")) >= {
        "yamalog",
        "db",
        "sqlite",
        "postgres",
        "移し",
    }


def test_focus_tells_the_person_from_the_assistant():
    assert focus_of("丹沢のとき結局どうするって決めたんだっけ") == "person"
    assert focus_of("ヘッドライトは100均のでもいいか聞いたよね。何て言われた？") == "assistant"
    assert focus_of("医者に聞くことをまとめてもらったよね") == "assistant"
    assert focus_of("what did I end up deciding about the laptop?") == "person"
    assert focus_of("what were the tips for speaking up in meetings?") == "assistant"
    assert focus_of("how was the weather") is None


def test_focus_reads_the_clause_that_asks():
    """A fix or a solution is what the person was told; the scene set before the question ("When
    I was ..., what was ...") does not make it a question about the person's own words, the
    question's own clause does."""
    assert focus_of("what was the fix for my bread that smelled of vinegar?") == "assistant"
    assert focus_of("is there a workaround for the printer that jams?") == "assistant"
    assert focus_of("did i ever find a fix for the leaking tap?") == "person"  # what the person did
    assert focus_of("when i was moving flats, what was the point about the deposit?") is None
    assert focus_of("last week i picked a bank. which one did i go with, and why?") == "person"
    assert focus_of("i was told about a rule. what did i decide?") == "person"
    assert focus_of("yesterday i set up the router.") == "person"  # no clause asks: the whole text


def test_decision_questions():
    assert asks_decision("結局どうするって決めたんだっけ")
    assert asks_decision("Why did I turn down the counteroffer?")
    assert asks_decision("まだ決まってなかったことって何だっけ")
    assert not asks_decision("ピアノの左手が走る件、どういうやり方だっけ")


def test_understand_takes_the_time_expression_out():
    q = understand("What did I make for Sunday meal prep in February last year?", NOW)
    assert q.time is not None and q.time.matched == "in February last year"
    assert (q.time.start.isoformat(), q.time.end.isoformat()) == (
        "2024-02-01T00:00:00+09:00",
        "2024-03-01T00:00:00+09:00",
    )
    assert set(q.words) == {"sunday", "meal", "prep"} and "february" not in q.vector_text.lower()
    only_time = understand("先週", NOW)
    assert only_time.time is not None and only_time.terms == ()
    assert understand("what did I say?", NOW).stop_only


def test_idf_bm25_and_fusion():
    assert rank.idf(1000, 1) > rank.idf(1000, 100) > rank.idf(1000, 900) > 0
    assert rank.bm25([2.0], 10, 20.0) > rank.bm25([2.0], 40, 20.0)  # shorter message, same terms
    assert rank.bm25([2.0, 1.0], 20, 20.0) > rank.bm25([2.0], 20, 20.0)  # more terms covered
    fused = rank.fuse(
        {"lexical": ["a", "b"], "vector": ["b", "c"]}, {"lexical": 1.0, "vector": 0.5}
    )
    assert [f.key for f in fused] == ["b", "a", "c"] and fused[0].ranks == {
        "lexical": 2,
        "vector": 1,
    }
    assert rank.matched_terms(content_terms("燕岳の山小屋"), "燕岳 小屋泊") == [0, 1]


def test_the_stop_lists_are_stopwordsiso_s_own() -> None:
    import stopwordsiso

    from core.stoplists import stop_words

    for lang in ("en", "ja"):
        assert stop_words(lang) == stopwordsiso.stopwords(lang) and stop_words(lang)
    assert stop_words("xx") == frozenset()


def test_local_time_is_the_machines_named_zone_not_its_offset_today(monkeypatch):
    from search.query import parse_now

    monkeypatch.delenv("PMEM_TZ", raising=False)
    monkeypatch.setenv("TZ", "Europe/Berlin")
    # a naive --now in July is read at summer time even when today is winter
    assert parse_now("2024-07-10T10:00").utcoffset() == timedelta(hours=2)
    assert parse_now("2024-01-10T10:00").utcoffset() == timedelta(hours=1)
    assert str(parse_now(None).tzinfo) == "Europe/Berlin"
    assert parse_now("2024-07-10T10:00", "Asia/Tokyo").utcoffset() == timedelta(hours=9)
