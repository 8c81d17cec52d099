"""The change of mind found by meaning (issue 27, item 2): a later conversation that reverses or
redoes an earlier decision in words no cue list holds is appended to that decision's memory,
and a conversation on another matter that shares a word with it is not."""

from __future__ import annotations

from datetime import timedelta

import pytest

from core.models import DraftRecord, MemoryIndexEntry
from providers.extractive import change, draft_record, pairing
from providers.extractive.change import _CHANGE_RE, turns_back
from providers.extractive.structure import dropped_things
from tests.test_extractive_drafter import make_conv

A = "ご相談です"  # an assistant turn between the person's messages

EARLIER = {
    "kyoto": [
        "来月の三連休、家族で京都に一泊旅行することにした。",
        "理由は、紅葉がちょうど見頃なのと、娘が嵐山のトロッコ列車に乗りたがってるから。",
        "まだ決まってないのは、宿を町家にするかホテルにするか。",
    ],
    "school": [
        "駅前の英会話スクールに週2回通うことにする。",
        "理由は、仕事で英語の会議が増えたから。",
    ],
    "camera": [
        "I'll buy the Sony A7 IV for the trip photos.",
        "The main reason is the autofocus on moving kids.",
        "Still not sure whether I need a second lens.",
    ],
    "insurance": [
        "終身保険を解約して、掛け捨ての収入保障保険に入ることにする。",
        "理由は、保険料が半分以下になるから。",
    ],
    "osaka": [
        "We'll move to Osaka next spring when my transfer starts.",
        "Mostly because the rent there is lower and my parents live nearby.",
    ],
}

# reversals in wording none of the drafter's cue lists holds (checked below)
REVERSALS = [
    ("kyoto", ["京都旅行は行かないことにした。", "娘が熱を出したので、三連休は家でゆっくりする。"]),
    ("kyoto", ["京都の一泊旅行、今回は見送ることにする。", "宿の予約も取り消した。"]),
    ("kyoto", ["京都に行くつもりだったけど、旅行は来年の春に回すことにした。"]),
    (
        "school",
        ["英会話スクールに通うのはやめにした。", "オンライン英会話で毎朝25分やることにする。"],
    ),
    ("school", ["英会話スクールの申し込み、結局キャンセルすることにした。"]),
    ("camera", ["I'm not buying the Sony A7 IV.", "I'll keep using my phone for the trip photos."]),
    ("camera", ["I was going to buy the Sony A7 IV, but I'll rent one for the trip instead."]),
    (
        "osaka",
        ["We won't move to Osaka next spring.", "My transfer was cancelled, so we stay here."],
    ),
    ("osaka", ["We had planned the move to Osaka, but we'll stay in Tokyo for two more years."]),
    (
        "school",
        ["英会話スクールに通う予定だったが、会社の研修で足りるので申し込まないことにした。"],
    ),
    # names the memory holds inside compounds (終身保険, 収入保障保険), said alone here
    ("insurance", ["収入保障は審査で断られた。", "終身は解約しないで、このまま続ける。"]),
    # the turn back beside the new decision, in a later message than the opening
    (
        "camera",
        [
            "The trip is in two weeks and the Sony A7 IV is back-ordered.",
            "We're not ordering the Sony A7 IV. I'll rent a Fujifilm body for the trip photos.",
        ],
    ),
]

# other matters that share a word with one of the memories
LOOK_ALIKES = [
    [
        "京都の出張で食べたラーメンがおいしかった店を、yamalogのメモに残しておきたい。",
        "店名はメモにする。",
    ],
    ["英語の本を月に1冊読むことにした。", "理由は語彙を増やしたいから。"],
    ["I'll clean the camera sensor myself this weekend.", "Because the shop charges too much."],
    [
        "Osaka friends are visiting next week, so I'll book a table at the izakaya.",
        "They like sake.",
    ],
    ["旅行保険はクレジットカード付帯のものにする。", "理由は、年会費の範囲で足りるから。"],
]


def _turns(lines: list[str]) -> list[tuple[str, str]]:
    turns = [("user", lines[0]), ("assistant", A)]
    for line in lines[1:]:
        turns += [("user", line), ("assistant", A)]
    return turns


def drafted(earlier: dict[str, list[str]]) -> dict[str, MemoryIndexEntry]:
    """Earlier decisions as the pipeline offers them: drafted, then committed."""
    out = {}
    for name, lines in earlier.items():
        record = draft_record(make_conv(_turns(lines), key=f"chatgpt:{name}"), [])
        assert record is not None and record.memory_kind == "decision"
        out[name] = _entry(name, record)
    return out


@pytest.fixture(scope="module")
def memories() -> dict[str, MemoryIndexEntry]:
    return drafted(EARLIER)


def _entry(name: str, record: DraftRecord) -> MemoryIndexEntry:
    return MemoryIndexEntry(
        id=f"mem-{name}",
        title=record.title,
        index_summary=record.index_summary,
        kind=record.memory_kind,
        current_revision=1,
        aliases=record.aliases,
        source_conversation_keys=list(record.source_conversation_keys),
    )


def _later(lines: list[str], i: int):  # type: ignore[no-untyped-def]
    conv = make_conv(_turns(lines), key=f"chatgpt:later{i}")
    return conv.model_copy(update={"created_at": conv.created_at + timedelta(days=30)})


def test_the_reversals_use_no_cue_word() -> None:
    for _, lines in REVERSALS:
        assert not any(_CHANGE_RE.search(line) for line in lines), lines


@pytest.mark.parametrize("i", range(len(REVERSALS)))
def test_a_reversal_in_new_words_appends_to_its_memory(
    i: int, memories: dict[str, MemoryIndexEntry]
) -> None:
    name, lines = REVERSALS[i]
    record = draft_record(_later(lines, i), list(memories.values()))
    assert record is not None
    assert (record.action, record.target_memory_id) == ("append", f"mem-{name}"), lines


@pytest.mark.parametrize("i", range(len(LOOK_ALIKES)))
def test_another_matter_sharing_a_word_is_not_appended(
    i: int, memories: dict[str, MemoryIndexEntry]
) -> None:
    record = draft_record(_later(LOOK_ALIKES[i], 100 + i), list(memories.values()))
    assert record is not None
    assert record.action == "create", (LOOK_ALIKES[i], record.target_memory_id)


# earlier decisions of titled conversations (exports carry a title, so the record's index line
# is its decision), reversed by a sentence that restates the decision and drops it, with no
# turn-back structure the drafter reads (ADR 0037: the restatement of the nearest memory)
TITLED = {
    "drums": (
        "ドラム教室",
        ["駅前のドラム教室に月2回通うことにする。", "理由は、ストレス解消になるから。"],
    ),
    "sofa": ("ソファ 買い替え", ["無印の3人掛けソファを買うことにした。", "座面が広いから。"]),
    "pottery": (
        "Pottery class",
        ["I'll join the Saturday pottery class at the community studio.", "A friend goes there."],
    ),
}

RESTATED = [
    ("drums", ["駅前のドラム教室に通う話は、なしにした。", "家で電子ドラムを練習する。"]),
    ("sofa", ["無印の3人掛けソファは、うちの玄関を通らないと言われた。", "2人掛けのを買う。"]),
    (
        "pottery",
        [
            "The Saturday pottery class at the community studio is not happening for me.",
            "I'll take an online course at home.",
        ],
    ),
]

RESTATED_LOOK_ALIKES = [
    ["ドラマの最終回、録画して週末に見ることにする。", "平日は帰りが遅いから。"],
    ["I'll paint the studio wall white this weekend.", "The old color is too dark."],
]


@pytest.fixture(scope="module")
def titled(memories: dict[str, MemoryIndexEntry]) -> list[MemoryIndexEntry]:
    out = list(memories.values())
    for name, (title, lines) in TITLED.items():
        conv = make_conv(_turns(lines), key=f"chatgpt:{name}", title=title)
        record = draft_record(conv, [])
        assert record is not None and record.memory_kind == "decision"
        out.append(_entry(name, record))
    return out


def test_the_restatements_use_no_cue_word_nor_turn_back() -> None:
    for _, lines in RESTATED:
        assert not any(_CHANGE_RE.search(line) for line in lines), lines
        assert not any(turns_back(line) for line in lines), lines


@pytest.mark.parametrize("i", range(len(RESTATED)))
def test_a_restated_and_dropped_decision_appends_to_its_memory(
    i: int, titled: list[MemoryIndexEntry]
) -> None:
    name, lines = RESTATED[i]
    record = draft_record(_later(lines, 200 + i), titled)
    assert record is not None
    assert (record.action, record.target_memory_id) == ("append", f"mem-{name}"), lines


@pytest.mark.parametrize("i", range(len(RESTATED_LOOK_ALIKES)))
def test_a_look_alike_of_a_titled_memory_is_not_appended(
    i: int, titled: list[MemoryIndexEntry]
) -> None:
    record = draft_record(_later(RESTATED_LOOK_ALIKES[i], 300 + i), titled)
    assert record is not None
    assert record.action == "create", (RESTATED_LOOK_ALIKES[i], record.target_memory_id)


# a decision given up by a predicate whose head stops, cancels or refuses what it governs, or
# by a state of being given up ("X is out"), with that argument the nearest memory's decision
# (ADR 0037: structure.dropped_things); each fails with that reading off
GIVEN_UP = [
    (
        "osaka",
        [
            "Osaka is out for now, my transfer got postponed by a year.",
            "We'll renew the lease here.",
        ],
    ),
    (
        "pottery",
        ["The pottery class is over for me, the stools hurt my back.", "I'll swim on Saturdays."],
    ),
    ("kyoto", ["一泊旅行は見送って、日帰りで鎌倉に行く。"]),
    ("sofa", ["3人掛けソファは見合わせて、今のを張り替える。"]),
]

# a giving-up predicate whose argument is another thing than a memory's decision, though the
# sentence names a memory's thing (京都, ソファ, camera)
GIVEN_UP_LOOK_ALIKES = [
    ["京都のお土産を買うのはやめて、駅でお菓子を買う。"],
    ["ソファの下の掃除はロボット掃除機をやめて、手でやる。"],
    ["Scrap the old camera bag, I'll get a backpack for hiking.", "It hurts my shoulder."],
]


@pytest.mark.parametrize("i", range(len(GIVEN_UP)))
def test_a_decision_given_up_appends_to_its_memory(
    i: int, titled: list[MemoryIndexEntry], monkeypatch: pytest.MonkeyPatch
) -> None:
    name, lines = GIVEN_UP[i]
    assert not any(_CHANGE_RE.search(line) for line in lines), lines
    record = draft_record(_later(lines, 400 + i), titled)
    assert record is not None
    assert (record.action, record.target_memory_id) == ("append", f"mem-{name}"), lines
    monkeypatch.setattr(change, "_drops_nearest", lambda *a: False)
    monkeypatch.setattr(pairing, "given_up", lambda text: frozenset())  # the revisit's too
    record = draft_record(_later(lines, 400 + i), titled)
    assert record is not None and record.action == "create", "passes without the reading"


@pytest.mark.parametrize("i", range(len(GIVEN_UP_LOOK_ALIKES)))
def test_giving_up_another_thing_is_not_appended(i: int, titled: list[MemoryIndexEntry]) -> None:
    lines = GIVEN_UP_LOOK_ALIKES[i]
    assert any(dropped_things(line) for line in lines), lines
    record = draft_record(_later(lines, 450 + i), titled)
    assert record is not None
    assert record.action == "create", (lines, record.target_memory_id)


def test_the_index_line_after_a_change_names_the_new_plan(
    titled: list[MemoryIndexEntry],
) -> None:
    lines = ["駅前のドラム教室には、もう通わないことにした。", "代わりに家で電子ドラムを練習する。"]
    record = draft_record(_later(lines, 470), titled)
    assert record is not None and record.target_memory_id == "mem-drums"
    assert "電子ドラム" in record.index_summary, record.index_summary


# --- the revisit (providers.extractive.pairing.revisits): the one candidate is the memory
# nearest to the person's text (the append gate's measure); it is changed only when a sentence
# revisits its decision: another value for it, a dated earlier act told in the past, a giving
# up whose topic is the decision's thing, an earlier plan quoted and turned back

REVISITED = {
    "price": [
        "店の食パン、4月から1斤420円に値上げすることにした。",
        "理由は、小麦とバターが上がったから。",
    ],
    "wedding": ["入籍は来年の6月にする。", "理由は、二人とも仕事が落ち着くから。"],
    "job_ad": [
        "土曜だけのアルバイトを1人募集することにした。",
        "理由は、土曜の午前が一人では回らないから。",
    ],
    "freelance": [
        "I'm going to quit my job at the end of April and go freelance from July.",
        "Because two clients already asked me for work.",
    ],
    "cram": ["娘を駅前の個別指導の塾に入れることにした。", "理由は、数学の点が伸びないから。"],
    "roadbike": [
        "通勤とロングライド用に、Giant の Contend AR 3 にする。",
        "理由は、予算内で一番軽いから。",
    ],
    "ryokan": [
        "箱根の旅行、強羅の旅館を2泊予約することにした。",
        "理由は、露天風呂付きの部屋が空いていたから。",
    ],
    "flat": [
        "引っ越しはしないで、今の部屋の契約を更新する。",
        "理由は、更新料が家賃1か月分で済むから。",
    ],
    "rest": ["部活の休養日、今年は月曜を完全オフにする。", "理由は、生徒が疲れているから。"],
    "trip": ["卒業旅行は台湾に3泊で行くことにした。", "理由は、直行便があるから。"],
    "exam": [
        "I'm going to take the TOEIC test on January 26.",
        "Because my company pays the fee once a year.",
    ],
}

REVISITS = [
    # the opening recalls a decision of last month and tells another act on an object since
    (
        "roadbike",
        ["先月決めたロードバイク、結局 Cannondale の CAAD13 を買った。", "在庫があったから。"],
    ),
    # the opening recalls a dated earlier act; the decision gives up what it made, unnamed
    (
        "roadbike",
        [
            "5月に注文した Giant のロードバイク、入荷が半年先になるって言われた。",
            "注文は取り消して、店に在庫がある方にした。",
        ],
    ),
    # another amount for the same thing (redo)
    (
        "price",
        ["食パンの値段、もう一度考えた。", "売れ行きが落ちたので、食パンは5月から380円に下げる。"],
    ),
    # another date for a thing both name (redo)
    ("wedding", ["ビザの期限がわかった。", "入籍は3/14に前倒しする。"]),
    # a dated earlier act opening the conversation in the past tense (recalls)
    ("job_ad", ["2月に出したアルバイトの募集、取り下げることにした。", "応募が一人も来なかった。"]),
    # the same, in Japanese against an English memory: by meaning, not by names
    (
        "freelance",
        [
            "4月に話した独立の件、いったん白紙に戻すことにした。",
            "会社が週4日の勤務を認めてくれて、フリーランスになるのはやめる。",
        ],
    ),
    # a giving up whose topic is the decision's thing (drops)
    ("cram", ["塾は今月いっぱいでやめて、数学は祖父に見てもらう。"]),
    # a giving up and a decision in one sentence, of the conversation's own decision (replaces)
    (
        "roadbike",
        [
            "ロードバイクの件でまた相談。",
            "お店に相談して、頼んでた方は取り消してもらって、グラベルの Topstone 2 にすることにした。",
        ],
    ),
    # new phrasings of giving up, turning back, another date, in both languages
    ("job_ad", ["アルバイトの募集、結局やめた。", "土曜は母に手伝ってもらう。"]),
    ("wedding", ["入籍、6月はやめて秋にする。"]),
    (
        "freelance",
        ["I'm not going freelance; my company offered me a four-day week.", "I'll stay."],
    ),
    ("cram", ["塾、合わなかったのでやめることにした。", "家で通信教育にする。"]),
    ("roadbike", ["Contend AR 3 はキャンセルして、Topstone にした。"]),
    # the same thing set to another value (redo: the argument of にする and its value)
    ("rest", ["部活の休みの件で相談。", "秋からは月曜は軽めの練習とミーティングの日にする。"]),
    # the thing the title names set to a value the decision does not hold (redo)
    ("rest", ["新チームになったので、部活の休養日を水曜に移す。", "職員会議の日だから。"]),
    # the act done again with another value, in another place (redo: V+直す)
    ("trip", ["友達のパスポートが間に合わなくて、卒業旅行は沖縄に2泊で取り直した。"]),
    # an English move to another date (redo: "moving … to")
    ("exam", ["My brother's exam is that weekend, so I'm moving my TOEIC test to March 16."]),
    # an earlier plan quoted and turned back (recalls)
    (
        "flat",
        [
            "11月に「今の部屋に残る」って話したけど、あれはひっくり返すことになった。",
            "駅近の2LDKに申し込んだ。",
        ],
    ),
    # a past act on the recalled thing as its sole argument, then a negation decided (recalls)
    (
        "job_ad",
        [
            "2月に出した土曜のアルバイト募集、引っ込めた。",
            "なので人は増やさず、土曜は昼で閉めることにする。",
        ],
    ),
    # the memory's value named in a clause of its own, another set in the last one (redo)
    ("wedding", ["6月の入籍は仕事の繁忙期と重なって、9月にずらすことにした。"]),
    (
        "exam",
        ["A work trip lands that weekend, so I'll move my TOEIC from January 26 to March 8."],
    ),
    # the decided thing set aside for another (drops: a negated copula, "rather than")
    ("cram", ["数学の点は少し上がった。", "でも来月からは塾ではなく、家で通信教育にする。"]),
    (
        "freelance",
        [
            "My company offered me a four-day week.",
            "So I'll keep my job rather than quit it at the end of April.",
        ],
    ),
]

# the same matters taken up again without a change: the decision kept, a past state, a date of
# another thing, a giving up of another thing, a question about the past
REVISIT_LOOK_ALIKES = [
    # a day as a time, not as the thing set; the act done again with the memory's own value; a
    # move with the memory's own date
    ("rest", ["部活のあとの膝の痛みの件。", "月曜に病院に行ってみる。"]),
    ("rest", ["部活の休養日は、新チームでもこれまで通り月曜にする。"]),
    ("trip", ["台湾の卒業旅行の写真、3泊分のアルバムを作り直した。", "みんなに配る。"]),
    ("exam", ["I moved my desk to the window to study for the January 26 TOEIC test."]),
    # a dated earlier act opening the conversation, the plan going on: nothing decided, given
    # up or negated
    ("job_ad", ["2月に出したアルバイトの募集、3人応募が来た。", "来週面接する。"]),
    ("price", ["4月に値上げした食パン、先週から売れ行きが戻ってきた。", "この値段で続ける。"]),
    (
        "freelance",
        [
            "I told my manager in April that I'm leaving in July, and she took it well.",
            "Now I need a logo.",
        ],
    ),
    ("cram", ["先月入れた塾の面談に行ってきた。", "先生は丁寧だった。"]),
    ("roadbike", ["Giant の Contend AR 3、納車された。", "初ライドで糸島まで走った。"]),
    ("ryokan", ["3月に予約した強羅の旅館、最高だった。", "露天風呂付きの部屋にしてよかった。"]),
    ("price", ["4月に値上げした食パン、思ったより売れてる。", "このまま420円で続ける。"]),
    (
        "cram",
        [
            "去年の夏に塾の体験に行ったけど、娘は楽しかったらしい。",
            "今日は数学のテストが返ってきた。",
        ],
    ),
    ("cram", ["娘のピアノは今月いっぱいでやめて、水泳に変える。"]),
    ("wedding", ["入籍の前に、両家で食事会をすることにした。", "場所は駅前の和食のお店にする。"]),
    (
        "flat",
        ["1年前は今の部屋の契約更新のたびに相見積もりを取ってたけど、いつの間にかやめてた。"],
    ),
    # a turn back that recalls why the decision was made, and changes nothing
    (
        "roadbike",
        [
            "Contend AR 3 にしたときは軽さで選んだけど、最近は乗り心地のほうが気になってきた。",
            "サドルの相談をしたい。",
        ],
    ),
    # another count of nights, for another place
    ("ryokan", ["夏休みの旅行、知床の民宿に3泊することにした。", "理由は、クマを見たいから。"]),
    # a past act on the recalled thing with nothing negated or given up (the plan done); a
    # time named as a phrase before another date (another event after the decided one)
    (
        "job_ad",
        [
            "2月に出した土曜のアルバイト募集、締め切った。",
            "土曜は来週から学生さんに入ってもらうことにする。",
        ],
    ),
    ("wedding", ["6月の入籍のあと、9月に両家で食事会をすることにした。"]),
    # another thing set aside than the decided one
    (
        "roadbike",
        ["Contend AR 3 で走るときの服の件。", "ジャージではなく、普段着で乗ることにした。"],
    ),
    ("exam", ["For the January 26 TOEIC test, I'll study with an app rather than a textbook."]),
    # a remark on what the decision is not, beside the memory's thing (no decision of its own)
    (
        "cram",
        [
            "娘の勉強の件。",
            "塾とかじゃなくて、夏休みは図書館で一緒に勉強するだけ。",
            "週2回にする。",
        ],
    ),
    # the memory's value and start kept, another thing started from another month
    ("price", ["4月の値上げはそのまま続けて、5月から新しいパンを店に並べる。"]),
    # a giving up of an option this conversation weighs, the choice made among its own options
    (
        "roadbike",
        [
            "ロードバイク用にサイコンを買うか迷ってる。",
            "やっぱりサイコンはやめて、スマホのアプリを使うことにした。",
        ],
    ),
]


@pytest.fixture(scope="module")
def revisited() -> list[MemoryIndexEntry]:
    return list(drafted(REVISITED).values())


def test_the_revisits_use_no_cue_word() -> None:
    for _, lines in REVISITS:
        assert not any(_CHANGE_RE.search(line) for line in lines), lines


@pytest.mark.parametrize("i", range(len(REVISITS)))
def test_a_revisit_appends_to_the_memory_it_changes(
    i: int, revisited: list[MemoryIndexEntry], monkeypatch: pytest.MonkeyPatch
) -> None:
    name, lines = REVISITS[i]
    record = draft_record(_later(lines, 500 + i), revisited)
    assert record is not None
    assert (record.action, record.target_memory_id) == ("append", f"mem-{name}"), lines
    # the revisit reading (or the rules' turn back / giving up, which it confirms) is what
    # appends: without both the same conversation creates
    monkeypatch.setattr(pairing, "revisits", lambda *a, **k: frozenset())
    monkeypatch.setattr(change, "changed_memory", lambda *a, **k: None)
    record = draft_record(_later(lines, 500 + i), revisited)
    assert record is not None and record.action == "create", ("passes without it", lines)


@pytest.mark.parametrize("i", range(len(REVISIT_LOOK_ALIKES)))
def test_the_same_matter_without_a_change_is_not_appended(
    i: int, revisited: list[MemoryIndexEntry]
) -> None:
    name, lines = REVISIT_LOOK_ALIKES[i]
    record = draft_record(_later(lines, 550 + i), revisited)
    assert record is not None
    assert record.action == "create", (lines, record.target_memory_id)
    # it is near the memory it looks like: the gate's candidate, so the revisit decides
    conv = _later(lines, 550 + i)
    near = pairing.gate_nearest(pairing.gate_text(conv), revisited)
    assert near is not None and near[0].id == f"mem-{name}", (lines, near)


def test_the_readers() -> None:
    # a negated する with no noun of its own gives up no thing
    # a negated continuing state tells how things have been, no plan taken back
    assert change._state_negated("買ってから一度も乗ってない。")
    assert not change._state_negated("この冷蔵庫は搬入できない。")
    assert not pairing._object_act("3月に出した募集、3人応募が来た。")
    assert pairing._object_act("先月決めた電チャリ、結局ヤマハのを買った。")
    lone = "手続きはまだだったけど、しないことにした。"
    assert not pairing.given_up(lone) - pairing._light_verbs(lone)
    assert pairing.given_up("車は買わないことにした。") - pairing._light_verbs(
        "車は買わないことにした。"
    )
    assert pairing._refers_back("頼んでた方は取り消してもらった。")
    assert not pairing._refers_back("カメラはやめて、センサーにした。")
    assert pairing.recalls("3月に出した土曜の求人、取り下げた。")
    assert pairing.recalls("The flights I booked in May are gone.")
    assert not pairing.recalls("昨日、やっと山に行ってきた。")  # dated, but no earlier act named
    assert pairing.past_state("いつの間にかやめてた。") and pairing.past_state("やめていた。")
    assert pairing._past_act("取り下げた。") and not pairing._past_act("最高だった。")
    assert not pairing.past_state("出店キャンセルの連絡した。")
    assert pairing._quoted_plan("10月に「今の部屋に残る」って話したけど、変わった。")
    assert not pairing._quoted_plan("「車いるかな」って思ってたけど、いらなそう。")
    assert "塾" in pairing.given_up("塾は9月いっぱいでやめて、数学は祖父に見てもらう。")
    assert not pairing.given_up("終身は解約しないで、このまま続ける。")  # kept, not given up
    assert pairing._values("400円に下げる、4/11に") == {"円": {"400"}, "月": {"4"}}
    # a negated restatement takes back what the index line holds only when that is a decision,
    # a plan or the person's own act, not what someone else did (an episode about a player)
    assert not change._holds_a_decision(
        "1年の佐藤がサーブで6連続ポイントとって、泣きそうになった。"
    )
    assert change._holds_a_decision("まずは母のデイサービスを週2回にすることにしました。")
    assert change._holds_a_decision("I booked the flight to Seattle for October 15.")
    assert not change._holds_a_decision("The team won the cup in the last minute.")


# a life's matters share its people: a later decision on another matter that names the same
# family, an episode told after a decision, a habit told in the past, an offer received (a
# passive) and a deliberation (考えたが) are no revisit of the earlier decision (the false
# appends found on a held-out set, in our own words)
FAMILY = {
    "handover": [
        "妻と話しましたが、来年の春から店の経営を娘の美咲に任せることにします。",
        "美咲はもう仕入れも帳簿もほとんど自分でやっているから。",
    ],
    "trip": [
        "結婚30年の記念に、10月に沖縄へ3泊で行くことにした。",
        "理由は、妻が前から行きたがってたから。",
    ],
}
FAMILY_LOOK_ALIKES = [
    [  # another matter, the same people
        "美咲の夫の拓也くんのことで相談です。",
        "拓也くんに月20万の給料を出すことにしました。美咲が産休のあいだは拓也くんが店を回すし、ちゃんと払わんと美咲に代替わりしたときに立場があいまいになる。",
    ],
    [  # an episode told after the trip was decided
        "記念の旅行、昨日まで沖縄に行ってきました。",
        "妻は毎朝海を見て喜んどった。",
    ],
    pytest.param(  # a habit told in the past, then a decision on another matter
        [
            "昔の同僚から来月釣りに行かんかと誘われとる。毎年行っとったが、ここ2年は妻のことで断っとった。",
            "来月の連休に1泊で釣りに行くことにした。",
        ],
        marks=pytest.mark.xfail(
            strict=True,
            reason="known: the amount reading takes 1泊 for another value of the nearest "
            "memory's 3泊 (a rule asking for a shared thing cost a held-out change: 角食 for 食パン)",
        ),
    ),
    [  # an offer received and a deliberation, then a decision on another matter
        "商店会で来年度の会長をやってくれんかと打診された 順番としては私になるらしい",
        "ひと晩考えたが 商店会の会長は断ることにします",
    ],
]


@pytest.fixture(scope="module")
def family() -> list[MemoryIndexEntry]:
    return list(drafted(FAMILY).values())


@pytest.mark.parametrize("lines", FAMILY_LOOK_ALIKES)
def test_the_same_people_an_episode_a_habit_or_an_offer_is_no_change(
    lines: list[str], family: list[MemoryIndexEntry]
) -> None:
    record = draft_record(_later(lines, 700 + len(lines[0])), family)
    assert record is not None
    assert record.action == "create", (lines, record.target_memory_id)


def test_the_readers_of_a_past_habit_an_offer_and_a_deliberation() -> None:
    from providers.extractive.change import person_names
    from providers.extractive.pairing import recalls
    from providers.extractive.structure import past_state

    assert past_state("ここ2年は妻のことで断っとった") and past_state("毎朝読んどった")
    assert past_state("やめてた") and not past_state("断った")
    assert not recalls("来年度の会長をやってくれんかと打診された 順番としては私になるらしい")
    assert not recalls("ひと晩考えたが 会長は断ることにします")
    assert recalls("3月に出した土曜の求人、取り下げた。")
    assert recalls("5月に注文した Giant のロードバイク、入荷が半年先になるって言われた。")
    assert {"美咲", "拓也"} <= person_names("美咲の夫の拓也くんのことで")


# the start of a decided thing moved to another point of the same kind (redo: the から phrase,
# compared by meaning), and a decided place given up by the head of its name (drops); another
# thing started from a point, another thing given up, are no change
MOVED = {
    **FAMILY,
    "photo": [
        "結婚式の前撮りは江ノ島で撮ることにした。",
        "理由は、海と灯台が一緒に撮れるから。",
    ],
}
MOVES = [
    (
        "handover",
        ["美咲の出産が決まった。", "美咲への引き継ぎは、再来年の正月からにすることにしました。"],
    ),
    (
        "photo",
        [
            "前撮りの日、台風で船も橋も危ないらしい。",
            "相談して、島はやめて鎌倉の長谷寺でお願いした。",
        ],
    ),
]
MOVE_LOOK_ALIKES = [
    ["店の帳簿の件。", "来年の決算から税理士さんに頼むことにしました。"],
    ["前撮りの衣装の件。", "和装はやめて、ドレスだけにした。"],
]


@pytest.fixture(scope="module")
def moved() -> list[MemoryIndexEntry]:
    return list(drafted(MOVED).values())


@pytest.mark.parametrize("i", range(len(MOVES)))
def test_a_start_moved_or_a_place_given_up_by_its_head_appends(
    i: int, moved: list[MemoryIndexEntry], monkeypatch: pytest.MonkeyPatch
) -> None:
    name, lines = MOVES[i]
    assert not any(_CHANGE_RE.search(line) for line in lines), lines
    record = draft_record(_later(lines, 800 + i), moved)
    assert record is not None
    assert (record.action, record.target_memory_id) == ("append", f"mem-{name}"), lines
    monkeypatch.setattr(pairing, "revisits", lambda *a, **k: frozenset())
    monkeypatch.setattr(change, "changed_memory", lambda *a, **k: None)
    record = draft_record(_later(lines, 800 + i), moved)
    assert record is not None and record.action == "create", ("passes without it", lines)


@pytest.mark.parametrize("i", range(len(MOVE_LOOK_ALIKES)))
def test_another_start_or_another_thing_given_up_is_no_change(
    i: int, moved: list[MemoryIndexEntry]
) -> None:
    record = draft_record(_later(MOVE_LOOK_ALIKES[i], 850 + i), moved)
    assert record is not None
    assert record.action == "create", (MOVE_LOOK_ALIKES[i], record.target_memory_id)


def test_the_readers_of_values_starts_and_heads() -> None:
    from providers.extractive import readings

    assert readings.value_replaced(
        "12月の試験はパスして、来年7月に回すことにした。", {"月": {"12"}}
    )
    assert not readings.value_replaced("6月の入籍のあと、9月に食事会をする。", {"月": {"6"}})
    assert not readings.value_replaced(
        "I took the January 26 test and want to get the results on March 8.", {"月": {"1"}}
    )
    assert readings.from_phrases("来年の4月から由佳に任せる。") == [["来年", "4", "月"]]
    assert readings.from_phrases("雨だから、やめる。") == []  # a cause, no start
    assert readings.compound_heads({"島"}, {"江ノ島", "前撮り"}) == {"島"}
    assert not readings.compound_heads({"前撮り"}, {"前撮り"})
    assert readings.acts_on_topic("3月に出した土曜の求人、取り下げた。")
    assert not readings.acts_on_topic("2月に出した募集、3人応募が来た。")
    assert not readings.acts_on_topic("先月申し込んだ講座、行ってきた。")
    assert readings.set_aside("塾ではなく、家で通信教育にする。") == {"塾"}
    assert not readings.set_aside("それは問題ではない。")  # no alternative follows
    assert "freelance" in readings.set_aside("I'll stay rather than go freelance.")
