"""The drafter's sentence roles by structure (issue 27 item 1): the grammar reader and the fitted
role scorer beside the cue lists."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from providers.extractive import person_sentences, roles
from providers.extractive.structure import en_flags, ja_flags
from tests.test_extractive_drafter import make_conv


@pytest.mark.parametrize(
    ("text", "present", "absent"),
    [
        ("夏は実家に帰らないことにした。", {"koto_ni", "negated", "past"}, {"question"}),
        ("今年は米にしよう", {"ni_suru", "volitional"}, {"past", "negated"}),
        ("食費が浮くのを実感したいから。", {"causal", "desire"}, {"nonpast_verb"}),
        ("講師を誰にするかはこれから考える。", {"embedded_question", "nonpast_verb"}, {"question"}),
        ("どっちにしようかな", {"question", "volitional"}, {"embedded_question"}),
        ("予約までしてたけど、見送る。", {"contrast", "nonpast_verb"}, {"past"}),
        ("雨なら延期すればいい。", {"conditional", "adjective_end"}, {"past"}),
    ],
)
def test_japanese_flags_come_from_the_forms(text: str, present: set[str], absent: set[str]) -> None:
    got = ja_flags(text)
    assert present <= got, got
    assert not absent & got, got


@pytest.mark.parametrize(
    ("text", "present", "absent"),
    [
        ("We're not getting the car after all.", {"first_person", "negated"}, {"future"}),
        ("I'll book the quick inspection, since it's done in a day.", {"future", "causal"}, set()),
        ("I've signed up for the half marathon.", {"past", "first_person"}, {"negated"}),
        (
            "Still not sure whether my shoes are good enough.",
            {"embedded_question", "unfinished"},
            set(),
        ),
        ("We're dropping the gym plan.", {"progressive"}, {"past"}),
        ("Should I keep the old one?", {"question", "hedge", "first_person"}, set()),
    ],
)
def test_english_flags_come_from_the_clause_head(
    text: str, present: set[str], absent: set[str]
) -> None:
    got = en_flags(text)
    assert present <= got, got
    assert not absent & got, got
    assert not ja_flags(text)


def test_the_shipped_weights_were_fitted_on_these_features() -> None:
    """A feature added or renamed without a new fit (bench/fit_roles.py --write) fails here."""
    w = json.loads(roles._WEIGHTS_FILE.read_text(encoding="utf-8"))
    assert w["features"] == roles.feature_names()
    for role in roles.SCORED_ROLES:
        assert set(w["roles"][role]) <= set(w["features"])
        assert 0 < w["thresholds"][role] < 1
        held, rules = w["cv"]["held_out"][role], w["cv"]["rules_alone"][role]
        assert held[1] == rules[1] > 0 and held[0] >= rules[0]


@pytest.fixture
def weights() -> Iterator[None]:
    """A tiny hand-made model (the mechanism under test, not the fitted numbers): a volitional
    form is a decision, the sentence right after the decision a reason."""
    roles.set_role_weights(
        {
            "roles": {
                "decision": {"bias": -3.0, "ja:volitional": 6.0},
                "reason": {"bias": -3.0, "pos:after_decision": 6.0},
                "open": {"bias": -9.0},
            },
            "thresholds": {"decision": 0.5, "reason": 0.5, "open": 0.5},
        }
    )
    yield
    roles.set_role_weights(None)


CONV = [
    ("user", "週末の予定で迷ってる。家で休むか、子どもと出かけるか。"),
    ("assistant", "天気次第で決めるのもありです。"),
    (
        "user",
        "土曜は子どもを連れて科学館へ行こう。雨の日に濡れるのがつらい。誰を誘うかは家族で話す。",
    ),
]


def test_the_scorer_gives_a_role_where_the_rules_give_none(weights: None) -> None:
    person = person_sentences(make_conv(CONV).drafting_messages)
    rules = roles._rule_roles(person)
    got = roles._roles(person)
    decision = next(s.index for s in person if s.text == "土曜は子どもを連れて科学館へ行こう。")
    assert decision not in rules  # no cue list knows 行こう
    assert got[decision] == "decision"
    # the rules' own roles stand; only sentences they leave without one are scored
    assert all(got[i] == r for i, r in rules.items())
    # 誰を誘うかは家族で話す。: an intent to settle an embedded question, an open point
    ask = next(s.index for s in person if s.text == "誰を誘うかは家族で話す。")
    assert rules[ask] == "open"


def test_without_a_rule_decision_the_scorers_best_anchors_the_rest(weights: None) -> None:
    turns = [("user", "引っ越しはしないでおこう。今の部屋のほうが駅に近い。")]
    person = person_sentences(make_conv(turns).drafting_messages)
    assert roles._rule_roles(person) == {}
    got = roles._roles(person)
    # the reason is the sentence after the decision: it has one only once the decision is found
    assert [(person[i].text, r) for i, r in sorted(got.items())] == [
        ("引っ越しはしないでおこう。", "decision"),
        ("今の部屋のほうが駅に近い。", "reason"),
    ]


def test_a_rule_switched_off_leaves_its_sentence_to_the_next_reading() -> None:
    """bench/fit_roles.py --rule-off measures a rule out of fold: switched off, the sentence it
    gave a role is read by the rules after it and the scorer, as if the rule were deleted."""
    person = person_sentences(make_conv(CONV).drafting_messages)
    ask = next(s.index for s in person if s.text == "誰を誘うかは家族で話す。")
    assert roles._rule_roles(person)[ask] == "open"
    roles.set_rules_off({"open:cue"})
    try:
        assert roles._rule_roles(person).get(ask) != "open"
    finally:
        roles.set_rules_off(set())
    assert roles._rule_roles(person)[ask] == "open"
    with pytest.raises(ValueError):
        roles.set_rules_off({"open:no_such_rule"})


def _rule_roles_of(turns: list[tuple[str, str]]) -> dict[str, str]:
    person = person_sentences(make_conv(turns).drafting_messages)
    got = roles._rule_roles(person)
    return {s.text: got.get(s.index, "-") for s in person}


def test_a_state_in_the_dictionary_form_is_no_act() -> None:
    assert "nonpast_verb" in ja_flags("来週の木曜に出す。")
    assert "nonpast_verb" not in ja_flags("公園の隣に駐輪場がある。")


def test_an_opening_that_leaves_the_choice_open_reports_no_decision() -> None:
    got = _rule_roles_of(
        [
            ("user", "ピアノ教室を変えるか迷ってる。月謝は月2千円上がる。"),
            ("assistant", "何が決め手になりそうですか？"),
            ("user", "隣町の教室に移る。先生の教え方が合うから。"),
        ]
    )
    assert got["月謝は月2千円上がる。"] != "decision"
    assert got["隣町の教室に移る。"] == "decision"


def test_a_causal_clause_set_off_before_an_intent_is_its_reason() -> None:
    turns = [
        ("user", "娘の自転車、補助輪を外すか迷ってる。"),
        ("assistant", "本人は乗りたがっていますか？"),
        ("user", "本人が外したいって言ってるから、今週末に補助輪を外す。"),
    ]
    person = person_sentences(make_conv(turns).drafting_messages)
    parts = roles._parts(person)
    assert [d.text for d in parts.decisions] == [
        "本人が外したいって言ってるから、今週末に補助輪を外す。"
    ]
    assert any(r.text.endswith("言ってるから") for r in parts.reasons), parts.reasons


def test_a_weak_open_cue_inside_an_intent_leaves_it_the_decision() -> None:
    assert not roles._opens("I'll repaint the hallway now and do the bedroom later.")
    assert roles._opens("The bedroom can wait until later.")
    assert roles._opens("Not sure yet whether the bedroom needs a second coat.")


def test_a_decision_deferred_until_a_condition_is_open() -> None:
    assert roles._opens("車を買うのは、駐車場の抽選に当たってからにする。")
    assert not roles._opens("駐車場の抽選に申し込むことにする。")


def test_an_intent_under_a_condition_is_no_decision() -> None:
    got = _rule_roles_of(
        [
            ("user", "来月から自転車通勤にしたい。どの自転車がいい？"),
            ("assistant", "クロスバイクが人気です。"),
            ("user", "ボーナスが出たら、クロスバイクを買う。"),
        ]
    )
    assert got["ボーナスが出たら、クロスバイクを買う。"] != "decision"
    got = _rule_roles_of(
        [
            ("user", "I want to repaint the kitchen."),
            ("assistant", "A light color makes it brighter."),
            ("user", "Once the lease is signed, we'll paint it pale green."),
        ]
    )
    assert got["Once the lease is signed, we'll paint it pale green."] != "decision"
    assert not roles.conditional_intent("We'll paint the kitchen in May.")
    assert not roles.conditional_intent("If anything, we'll paint it sooner.")
    # a rule that holds a condition, quoted and decided, is a decision's content
    assert not roles.conditional_intent("雨が降ったら中止、ってルールにする。")


def test_a_sentence_that_stops_at_a_cause_is_a_reason() -> None:
    assert roles._reasons("駅から近いし。")
    assert roles._reasons("先輩もそこに通ってるからね。")
    assert not roles._reasons("駅から近いところに住む。")
    # Sudachi reads ので after たい / た as の + the copula で: the same cause
    from providers.extractive.clauses import _ends_in_cause, _opens

    assert _ends_in_cause("娘が先生にもっと習いたいって言ったので。")
    assert _ends_in_cause("週末は家族で過ごしたいので。")
    assert not _ends_in_cause("週末は家族で過ごしたいのです。")
    # an open cue (気になる) inside such a cause leaves the sentence a reason
    assert not _opens("朝ごはんを抜いてるのがいちばん気になってたのと、夜も一人なので。")


def test_finding_out_an_embedded_question_is_open() -> None:
    assert roles._opens("週末に空いてる枠があるか電話で聞く。")
    assert roles._opens("The price depends on how many people sign up.")
    assert not roles._opens("空いてる枠があるか聞いたら、土曜が空いてた。")


def test_a_change_takes_what_was_reported_in_its_opening_as_reasons() -> None:
    turns = [
        ("user", "管理会社から連絡があって、来年から駐車場代が倍になるらしい。"),
        ("assistant", "それは大きな負担ですね。"),
        ("user", "車は手放して、電車とバスで通う。"),
    ]
    person = person_sentences(make_conv(turns).drafting_messages)
    parts = roles.change_reasons(roles._parts(person), person)
    assert any("倍になるらしい" in r.text for r in parts.reasons), parts.reasons
    assert roles._reported("友達が手伝ってくれるって。")
    assert not roles._reported("友達に手伝ってもらう。")


def test_a_condition_opens_a_clause_an_adverb_does_not() -> None:
    assert roles.conditional_intent("We'll paint the kitchen if the landlord agrees.")
    assert not roles.conditional_intent("I'll swim once a week and rest until then.")


def test_what_the_person_does_not_know_is_open() -> None:
    assert roles._opens("We have no idea which route the bus takes.")
    assert not roles._opens("We won't go where it's crowded.")


def test_a_weak_cue_inside_a_cause_leaves_it_a_reason() -> None:
    assert not roles._opens("家からはまだ遠いから。")
    assert roles._reasons("家からはまだ遠いから。")


def test_reported_speech_in_english() -> None:
    assert roles._reported("The vet says she needs a week of rest.")
    assert not roles._reported("I said I'd think about it.")


# ---------------------------------------------------------------- acts told as done, issue 27


@pytest.mark.parametrize(
    ("text", "done"),
    [
        ("秋の陶芸市、ブース出展に申し込んだ！", True),
        ("歯医者の予約、来月にずらした。", True),
        ("ジムの退会手続きした。", True),
        ("I registered for the autumn pottery fair.", True),
        ("So I just did it, I bought the blue one.", True),
        ("ガス代が先月から上がった。", False),  # a subject with が: what happened
        ("駅前の教室に見学に行ってきた。", False),  # て + くる: an experience told
        ("先生に褒められた。", False),  # passive
        ("電話したら、空きがあった。", False),  # a narration under a condition
        ("予約できなかった。", False),  # negated
        ("I got a letter from the school.", False),
        ("I wanted to ask about the fees.", False),
    ],
)
def test_an_act_told_as_done_is_read_by_structure(text: str, done: bool) -> None:
    from providers.extractive.structure import past_act

    assert past_act(text) is done


def test_the_opening_that_tells_an_act_done_first_holds_the_decision() -> None:
    got = _rule_roles_of(
        [
            ("user", "秋の陶芸市、ブース出展に申し込んだ！場所は河川敷。何を持っていけばいい？"),
            ("assistant", "テーブルと値札、釣り銭があると安心です。"),
            ("user", "ありがとう、テーブルは借りる。"),
        ]
    )
    assert got["秋の陶芸市、ブース出展に申し込んだ！"] == "decision"
    # a narration in the same place is no decision
    got = _rule_roles_of(
        [
            ("user", "ガス代が先月から上がった。どう節約すればいい？"),
            ("assistant", "給湯の温度を下げるのが手軽です。"),
        ]
    )
    assert got["ガス代が先月から上がった。"] != "decision"


def test_with_no_intent_said_an_act_done_after_the_answer_is_the_decision() -> None:
    turns = [
        ("user", "We are planning a weekend away. Lake or mountains, what would you pick?"),
        ("assistant", "The lake is calmer for a first trip."),
        ("user", "I booked two nights at the lake cabin. Thanks."),
    ]
    person = person_sentences(make_conv(turns).drafting_messages)
    parts = roles._parts(person)
    assert [d.text for d in parts.decisions] == ["I booked two nights at the lake cabin."]


def test_an_intent_outranks_an_act_done_at_the_same_score() -> None:
    turns = [
        ("user", "古いソファ、直すか買い替えるか迷ってる。"),
        ("assistant", "修理の見積もりを取ってみては？"),
        ("user", "家具屋さんと話した。修理はやめて、新しいのを買う。"),
    ]
    person = person_sentences(make_conv(turns).drafting_messages)
    parts = roles._parts(person)
    assert "修理はやめて、新しいのを買う。" in [d.text for d in parts.decisions]
    assert "家具屋さんと話した。" not in [d.text for d in parts.decisions]


def test_a_potential_form_is_no_intent() -> None:
    assert not roles._plain_intent("週末なら手伝える。")
    assert roles._plain_intent("週末に手伝う。")


def test_a_connective_of_consequence_makes_a_conclusion_of_what_came_before() -> None:
    turns = [
        (
            "user",
            "教室の月謝が4月から上がる。駐車場も遠くなった。なので、教室は今月でやめる。",
        ),
    ]
    person = person_sentences(make_conv(turns).drafting_messages)
    parts = roles._parts(person)
    assert [d.text for d in parts.decisions] == ["なので、教室は今月でやめる。"]
    reasons = [r.text for r in parts.reasons]
    assert "駐車場も遠くなった。" in reasons and "教室の月謝が4月から上がる。" in reasons
    assert "なので" not in reasons  # the connective is no reason clause


def test_a_cue_inside_a_subordinate_clause_yields_to_the_main_clause() -> None:
    assert not roles._opens("設定は自分じゃわからないし、休日がつぶれるのはもういや。")
    assert roles._opens("設定は自分じゃわからない。")
    # a resolution as the final predicate, whatever a clause before it says
    assert not roles._opens("雨次第で、朝のうちに決めることにする。")
    # an aside in brackets sets no role
    assert not roles._opens("兄が車を出してくれる(渋滞が心配だけど)。")


def test_a_question_without_a_question_mark_after_the_decision_is_open() -> None:
    got = _rule_roles_of(
        [
            ("user", "町内の清掃、今年は幹事を引き受けることにした。"),
            ("user", "悩んでるのは、道具を買うか借りるか。"),
        ]
    )
    assert got["悩んでるのは、道具を買うか借りるか。"] == "open"


def test_an_enumerated_reason_is_continued_by_the_next_statements() -> None:
    turns = [
        ("user", "車を手放すか迷ってる。"),
        ("assistant", "使う頻度はどうですか？"),
        (
            "user",
            "手放すことにした。理由はいくつかあって、まず月に2回しか乗ってない。"
            "駐車場代も高い。何か手続きで気をつけることある？",
        ),
    ]
    got = _rule_roles_of(turns)
    assert got["駐車場代も高い。"] == "reason"
    assert got["何か手続きで気をつけることある？"] != "reason"


def test_a_change_told_first_takes_what_follows_as_its_reasons() -> None:
    turns = [
        ("user", "来月の帰省、年末にずらした。父の手術が来月に決まって。病院は隣の市。"),
        ("user", "年末はどのくらい混む？"),
    ]
    person = person_sentences(make_conv(turns).drafting_messages)
    parts = roles._parts(person)
    assert parts.decisions[0].text == "来月の帰省、年末にずらした。"
    changed = roles.change_reasons(parts, person)
    assert "父の手術が来月に決まって。" in [r.text for r in changed.reasons]


def test_a_titles_abbreviation_ends_no_sentence() -> None:
    from providers.extractive.sentences import split_sentences

    assert split_sentences("We want to climb Mt. Fuji in July. It is far.") == [
        "We want to climb Mt. Fuji in July.",
        "It is far.",
    ]


def test_a_half_width_mark_before_japanese_ends_the_sentence() -> None:
    from providers.extractive.sentences import split_sentences

    # an IME's half-width ! straight before the next sentence ends the first one
    assert split_sentences("陶芸市のブースに申し込んだ!駅から近いので運びやすい。") == [
        "陶芸市のブースに申し込んだ!",
        "駅から近いので運びやすい。",
    ]
    # before the quotative って / と the sentence goes on; English keeps its reading
    assert split_sentences("「もう無理」だ!って叫んだ。") == ["「もう無理」だ!って叫んだ。"]
    assert split_sentences("Done!Next.") == ["Done!Next."]


def test_a_run_on_sentence_typed_with_spaces_is_cut_at_its_clause_ends() -> None:
    from providers.extractive.sentences import clause_units

    text = (
        "妻とも相談して 車は当分カーシェアで済ませることにしました 乗るのは月に2回くらいだし"
        " 駐車場代が月1万5千円もかかるので もう少し様子を見ます"
    )
    units = clause_units(text)
    assert "妻とも相談して 車は当分カーシェアで済ませることにしました" in units
    assert all(u in text for u in units)
    # a space between Latin words, or a short sentence, is no cut
    assert clause_units("車は当分 カーシェアにする") == ["車は当分 カーシェアにする"]


def test_an_act_done_just_now_is_a_decision_wherever_it_is_said() -> None:
    got = _rule_roles_of(
        [
            ("user", "冬の講座の締め切りが今日だった。去年は入門をとった。"),
            ("user", "続けられるか正直わからないけど、中級の講座にさっき申し込んだ。"),
        ]
    )
    assert got["続けられるか正直わからないけど、中級の講座にさっき申し込んだ。"] == "decision"
    assert got["去年は入門をとった。"] != "decision"  # an act of long ago: the situation


def test_a_list_of_reasons_goes_on_past_an_aside() -> None:
    got = _rule_roles_of(
        [
            ("user", "英会話、どっちの教室にするか迷ってる。"),
            ("assistant", "通いやすさはどうですか？"),
            (
                "user",
                "駅前の教室にすることにした。決め手は、先生が固定なこと。体験のとき話しやすかった。"
                "あと、振替が前日まで効く。",
            ),
        ]
    )
    assert got["あと、振替が前日まで効く。"] == "reason"


def test_a_question_clause_as_the_predicates_argument_is_open() -> None:
    # a question closed by か and taken up by は / が / も: what the person says of a question
    # still theirs, whatever the predicate (問題, 気になる, 難しい); own wording, not the sets'
    assert roles._opens("駐輪場をどこに借りるかが一番の問題。")
    assert roles._opens("保育園の送りを誰がやるかも気になる。")
    assert roles._opens("発表の順番をどう決めるかが難しい。")
    # answered (past, a resolution) or a choice between nouns: not open
    assert not roles._opens("送りを誰がやるかは夫と話し合うことにした。")
    assert not roles._opens("自転車か電車が候補。")


def test_a_decision_concluded_by_te_koto_de_takes_the_statements_before_it() -> None:
    # ってことで / てことで: the colloquial forms of ということで, a connective of consequence
    conv = make_conv(
        [
            ("user", "引っ越しの相談。"),
            ("assistant", "どうぞ。"),
            (
                "user",
                "今の部屋は駅から歩いて25分かかる。家賃も来月から上がるらしい。"
                "ってことで駅前の1DKに移る。",
            ),
        ]
    )
    person = person_sentences(conv.messages)
    got = roles._rule_roles(person)
    by_text = {s.text: got.get(s.index) for s in person}
    assert by_text["ってことで駅前の1DKに移る。"] == "decision"
    assert by_text["今の部屋は駅から歩いて25分かかる。"] == "reason"


def test_an_act_after_a_deliberation_is_the_decision() -> None:
    # the first clause deliberates (考えたけど、 迷ったけど、 …と話して、), the main clause acts
    assert roles._deliberated("だいぶ考えたけど、週末の当番を引き受けた。")
    assert roles._deliberated("迷ったけど、今年は合宿に参加させない。")
    assert roles._deliberated("妻と話して、車は手放した。")
    # the deliberation goes on, or nothing is settled: no decision
    assert not roles._deliberated("夫と話して、来月また考える。")
    assert not roles._deliberated("考えたけど、まだ決められない。")
    assert not roles._deliberated("話してたら楽しかった。")


def test_a_quotation_under_the_passive_of_iu_is_reported() -> None:
    assert roles._reported("工事は来月以降になるって言われた。")
    assert roles._reported("部品の入荷は秋と言われて、")
    assert not roles._reported("僕は無理だと言った。")


def test_a_polite_past_is_an_act_told_as_done() -> None:
    from providers.extractive.structure import past_act

    assert past_act("先週、管理会社に退去の連絡をしました。")
    assert past_act("ジムの月会員に申し込みました。")
    assert not past_act("体験に行ってきました。")  # an experience told, an auxiliary after て
    assert not past_act("電車が止まりました。")  # another subject with が


def test_an_act_told_with_a_detail_a_benefactive_or_a_framing_condition_is_done() -> None:
    from providers.extractive.structure import past_act

    # a detail appended after a comma, no predicate of its own
    assert past_act("駅前のヨガ教室の体験に申し込みました、全4回で5000円。")
    # the formal noun ところ + copula after た
    assert past_act("結局、週3回の送迎サービスを頼んだところです")
    # a change the person had made for them: する + てもらう (only する: 見せてもらった is an
    # experience, so ずらしてもらった is not read either)
    assert past_act("歯医者に電話して、予約は来月の頭に延期してもらった。")
    assert past_act("さっき窓口で、支払いを分割に変更してもらいました。")
    # a condition set off by a comma frames the act; one in the act's own clause tells a result
    assert past_act("窓口に問い合わせたら、今月中なら変更できるって言われて、さっき変更しました。")
    assert not past_act("設定を入れ直したら動いた。")
    # the benefactive of another verb: an experience or another's act
    assert not past_act("工房の中も見せてもらった。")
    assert not past_act("大丈夫だと聞いて、ほっとした。")  # an adverb + する: a feeling
    assert not past_act("先輩から一緒にやらないかって声をかけてもらった。")
    # a negation in the act's clause
    assert not past_act("体験には申し込まなかった、高かったので。")


def test_an_act_told_after_its_cause_is_the_decision_not_a_reason() -> None:
    got = _rule_roles_of(
        [
            ("user", "母の通院の付き添いをどうするか迷っています。平日は仕事があります。"),
            ("assistant", "付き添いサービスや家族での分担が考えられます。"),
            (
                "user",
                "ありがとうございます。母も一度試したいって言ってたので、結局付き添いサービス"
                "を月2回頼みました。心配なのは費用がどれくらいになるかです。",
            ),
        ]
    )
    assert got["母も一度試したいって言ってたので、結局付き添いサービスを月2回頼みました。"] == (
        "decision"
    )


def test_an_opening_that_leads_with_a_plan_reports_the_decision() -> None:
    conv = make_conv(
        [
            (
                "user",
                "About the piano lessons: I'm stopping them after March. "
                "The teacher is moving away and the new school is too far. "
                "Can you help me write a thank-you note?",
            ),
            ("assistant", "Of course. Here is a draft."),
            ("user", "Thanks, I'll send it tomorrow."),
        ]
    )
    person = person_sentences(conv.messages)
    got = roles._rule_roles(person)
    assert got.get(person[0].index) == "decision"
    # a plan the opening then puts to the assistant as a choice, or one under a condition,
    # does not lead as news
    for text in (
        "We're repainting the kitchen. Green or grey, what would you pick?",
        "If the quote is fair, we'll repaint the kitchen. What should we ask the painter?",
    ):
        person = person_sentences(make_conv([("user", text)]).messages)
        assert not roles._headline(person[0], person)


def test_a_question_clause_set_off_by_an_ellipsis_is_open() -> None:
    assert roles._opens("あとは引き継ぎを誰に頼むか…先輩はみんな忙しいと思う。")
    assert not roles._opens("引き継ぎを誰に頼むか…もう決めた。")


def test_an_open_cue_inside_a_sentence_that_stops_at_a_cause_is_a_reason() -> None:
    text = "夜だと駅までの道がわからないって娘が言ってたから。"
    assert not roles._opens(text)
    assert roles._reasons(text)
    assert roles._opens("駅までの道がわからない。")


def test_what_a_decision_weighed_in_its_first_clause_is_its_reason() -> None:
    text = "母の通院を考えて、今年の帰省は夏だけにする。"
    assert roles._weighed_clause(text) == "母の通院を考えて"
    conv = make_conv(
        [
            ("user", "年末どうしよう。"),
            ("assistant", "状況を教えてください。"),
            ("user", "寒い時期の長旅はきついよね、って二人で話して、年末の帰省はなしにする。"),
        ]
    )
    parts = roles._parts(person_sentences(conv.messages))
    assert any("長旅はきつい" in r.text for r in parts.reasons)
    assert roles._weighed_clause("夫と話して、車は手放した。") == ""  # nothing named
