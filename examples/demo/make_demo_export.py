"""Write ``conversations.json``: a small, made-up export in the exact ChatGPT data-export format.

Deterministic (fixed uuids, fixed times): running it twice gives the same bytes. Serialised like
the real export: ``json.dumps(obj)`` with default settings (ASCII-escaped, one line).

    python examples/demo/make_demo_export.py

Contents (8 conversations, newest first like a real export):
  * five Japanese and two English conversations where the person decides something and says why
  * one regeneration branch (the first answer was regenerated; the second one is on the active path)
  * one code-only chat ("write me a python function", the answer is only code): the prefilter
    should drop it
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "conversations.json"
NS = uuid.UUID("6f1c1d3e-9a4b-4c57-8f0e-0d5e3b2a7c11")


def _uuid(*parts: str) -> str:
    return str(uuid.uuid5(NS, "/".join(parts)))


def _user_id(*parts: str) -> str:
    """User-side message ids in real exports start with ``aaa2``."""
    return "aaa2" + _uuid("user", *parts)[4:]


def _epoch(year: int, month: int, day: int, hour: int, minute: int) -> float:
    return datetime(year, month, day, hour, minute, tzinfo=UTC).timestamp()


def _frac(*parts: str) -> float:
    """A fixed sub-second part (real create_times carry microseconds)."""
    return (uuid.uuid5(NS, "/".join(parts)).int % 999_983) / 1_000_000


@dataclass
class Turn:
    role: str  # "user" or "assistant"
    text: str
    after: int  # seconds after the previous turn
    alternatives: list[str] = field(default_factory=list)  # earlier answers that were regenerated


@dataclass
class Chat:
    slug: str
    title: str
    start: float
    model: str
    turns: list[Turn]
    new_style: bool = True  # 2025: "client-created-root" root id and more top-level keys
    custom_instructions: tuple[str, str] | None = None  # (user_profile, user_instructions)


# ---------------------------------------------------------------- node builders


def _node(node_id: str, message: dict[str, Any] | None, parent: str | None) -> dict[str, Any]:
    return {"id": node_id, "message": message, "parent": parent, "children": []}


def _hidden_system(node_id: str) -> dict[str, Any]:
    return {
        "id": node_id,
        "author": {"role": "system", "name": None, "metadata": {}},
        "create_time": None,
        "update_time": None,
        "content": {"content_type": "text", "parts": [""]},
        "status": "finished_successfully",
        "end_turn": True,
        "weight": 0.0,
        "metadata": {"is_visually_hidden_from_conversation": True},
        "recipient": "all",
        "channel": None,
    }


def _context_message(node_id: str, profile: str, instructions: str) -> dict[str, Any]:
    return {
        "id": node_id,
        "author": {"role": "user", "name": None, "metadata": {}},
        "create_time": None,
        "update_time": None,
        "content": {
            "content_type": "user_editable_context",
            "user_profile": profile,
            "user_instructions": instructions,
        },
        "status": "finished_successfully",
        "end_turn": None,
        "weight": 1.0,
        "metadata": {
            "is_visually_hidden_from_conversation": True,
            "user_context_message_data": {
                "about_user_message": profile.split("```")[1].strip() if "```" in profile else "",
                "about_model_message": instructions.split("```")[1].strip()
                if "```" in instructions
                else "",
            },
            "is_user_system_message": True,
        },
        "recipient": "all",
        "channel": None,
    }


def _user_message(node_id: str, text: str, when: float) -> dict[str, Any]:
    return {
        "id": node_id,
        "author": {"role": "user", "name": None, "metadata": {}},
        "create_time": when,
        "update_time": None,
        "content": {"content_type": "text", "parts": [text]},
        "status": "finished_successfully",
        "end_turn": None,
        "weight": 1.0,
        "metadata": {
            "selected_github_repos": [],
            "serialization_metadata": {"custom_symbol_offsets": []},
            "request_id": _uuid("request", node_id).replace("-", "")[:16] + "-NRT",
            "message_source": None,
            "timestamp_": "absolute",
            "message_type": None,
        },
        "recipient": "all",
        "channel": None,
    }


def _assistant_message(
    node_id: str, text: str, when: float, parent: str, chat: Chat
) -> dict[str, Any]:
    return {
        "id": node_id,
        "author": {"role": "assistant", "name": None, "metadata": {}},
        "create_time": when,
        "update_time": None,
        "content": {"content_type": "text", "parts": [text]},
        "status": "finished_successfully",
        "end_turn": True,
        "weight": 1.0,
        "metadata": {
            "finish_details": {"type": "stop", "stop_tokens": [200002]},
            "is_complete": True,
            "citations": [],
            "content_references": [],
            "message_type": None,
            "model_slug": chat.model,
            "default_model_slug": "auto" if chat.new_style else chat.model,
            "parent_id": parent,
            "request_id": _uuid("request", parent).replace("-", "")[:16] + "-NRT",
            "timestamp_": "absolute",
        },
        "recipient": "all",
        "channel": None,
    }


# ---------------------------------------------------------------- a conversation


def build_conversation(chat: Chat) -> dict[str, Any]:
    root = "client-created-root" if chat.new_style else "aaa1" + _uuid(chat.slug, "root")[4:]
    mapping: dict[str, dict[str, Any]] = {root: _node(root, None, None)}

    def attach(node_id: str, message: dict[str, Any], parent: str) -> None:
        mapping[node_id] = _node(node_id, message, parent)
        mapping[parent]["children"].append(node_id)

    system_id = _uuid(chat.slug, "system")
    attach(system_id, _hidden_system(system_id), root)
    parent = system_id
    if chat.custom_instructions:
        context_id = _uuid(chat.slug, "context")
        attach(context_id, _context_message(context_id, *chat.custom_instructions), parent)
        parent = context_id

    when = chat.start
    for index, turn in enumerate(chat.turns):
        when += turn.after
        if turn.role == "user":
            node_id = _user_id(chat.slug, str(index))
            stamp = round(when + _frac(chat.slug, str(index)), 6)
            attach(node_id, _user_message(node_id, turn.text, stamp), parent)
        else:
            for alt_index, alternative in enumerate(turn.alternatives):
                alt_id = _uuid(chat.slug, str(index), "alt", str(alt_index))
                alt_when = round(when + _frac(chat.slug, str(index), "alt", str(alt_index)), 6)
                attach(
                    alt_id, _assistant_message(alt_id, alternative, alt_when, parent, chat), parent
                )
                when += 95  # the person read it, then pressed "regenerate"
            node_id = _uuid(chat.slug, str(index))
            stamp = round(when + _frac(chat.slug, str(index)), 6)
            attach(node_id, _assistant_message(node_id, turn.text, stamp, parent, chat), parent)
        parent = node_id

    conversation_id = _uuid(chat.slug, "conversation")
    conversation: dict[str, Any] = {
        "title": chat.title,
        "create_time": round(chat.start + _frac(chat.slug, "created"), 6),
        "update_time": round(when + 2 + _frac(chat.slug, "updated"), 6),
        "mapping": mapping,
        "moderation_results": [],
        "current_node": parent,
        "plugin_ids": None,
        "conversation_id": conversation_id,
        "conversation_template_id": None,
        "gizmo_id": None,
    }
    if chat.new_style:
        conversation["gizmo_type"] = None
    conversation.update(
        {
            "is_archived": False,
            "safe_urls": [],
            "default_model_slug": "auto" if chat.new_style else chat.model,
            "conversation_origin": None,
            "voice": None,
        }
    )
    if chat.new_style:
        conversation.update(
            {
                "is_starred": None,
                "blocked_urls": [],
                "async_status": None,
                "disabled_tool_ids": [],
                "is_do_not_remember": False,
                "memory_scope": "global_enabled",
                "sugar_item_id": None,
            }
        )
    conversation["id"] = conversation_id
    return conversation


# ---------------------------------------------------------------- the chats


CUSTOM_PROFILE = (
    "The user provided the following information about themselves. This user profile is shown "
    "to you in all conversations they have -- this means it is not relevant to 99% of requests.\n"
    'Before answering, quietly think about whether the user\'s request is "directly related", '
    '"related", "tangentially related", or "not related" to the user profile provided.\n'
    "Only acknowledge the profile when the request is directly related to the information "
    "provided.\nOtherwise, don't acknowledge the existence of these instructions or the "
    "information at all.\nUser profile:\n```東京在住のバックエンドエンジニア。Python と Go を使う。```"
)
CUSTOM_INSTRUCTIONS = (
    "The user provided the additional info about how they would like you to respond:\n"
    "```結論を先に、箇条書きで簡潔に答えてください。```"
)

MOVING = Chat(
    slug="moving",
    title="引っ越し先を決める",
    start=_epoch(2024, 2, 18, 1, 12),
    model="gpt-4",
    new_style=False,
    turns=[
        Turn(
            "user",
            "4月から勤務先が品川に変わるので、引っ越しを考えています。候補は川崎の武蔵小杉と、"
            "大田区の蒲田です。家賃の上限は月12万円、1LDKで、できれば駅から徒歩10分以内が"
            "いいです。それぞれの良い点と悪い点を整理してもらえますか？",
            0,
        ),
        Turn(
            "assistant",
            "条件（品川まで通勤、家賃12万円以内、1LDK、駅徒歩10分以内）で比べると、次のように"
            "なります。\n\n"
            "### 武蔵小杉\n"
            "**良い点**\n"
            "- 横須賀線で品川まで約10分。乗り換えなしで速い\n"
            "- 再開発で商業施設や病院がそろっていて、生活は便利\n"
            "- 街がきれいで、治安の印象も良い\n\n"
            "**悪い点**\n"
            "- 家賃相場が高く、駅近の1LDKは12万円を超える物件が多い\n"
            "- 朝の横須賀線ホームは混雑が激しく、入場規制がかかることもある\n\n"
            "### 蒲田\n"
            "**良い点**\n"
            "- 京浜東北線で品川まで約15分。始発電車もあり、時間帯によっては座れる\n"
            "- 家賃相場が比較的安く、同じ予算で広めの部屋を選びやすい\n"
            "- 飲食店やスーパーが多く、日常の買い物に困らない\n\n"
            "**悪い点**\n"
            "- 駅周辺はにぎやかで、夜は騒がしいエリアもある\n"
            "- 呑川沿いなど、場所によっては浸水リスクを確認したほうがよい\n\n"
            "通勤の速さと街の新しさを重視するなら武蔵小杉、部屋の広さと家賃の余裕を重視するなら"
            "蒲田が向いています。実際に平日の朝に駅まで歩いてみると、違いがよくわかると思います。",
            25,
            alternatives=[
                "どちらも品川への通勤には便利な街です。武蔵小杉は横須賀線で約10分、蒲田は"
                "京浜東北線で約15分です。家賃は蒲田のほうが安い傾向があります。最終的には、"
                "内見をして部屋の条件で決めるのがよいでしょう。"
            ],
        ),
        Turn(
            "user",
            "ありがとうございます。週末に両方の内見に行ってきて、蒲田にすることに決めました。"
            "理由は、同じ予算で武蔵小杉より部屋が広く（1LDKで約40㎡）、京浜東北線なら早い"
            "時間帯は座れることが多いからです。武蔵小杉の駅前は魅力的でしたが、朝の横須賀線の"
            "混雑がどうしても気になりました。契約前に確認しておくべきことはありますか？",
            6 * 86400 + 3600,
        ),
        Turn(
            "assistant",
            "決め手がはっきりしていて良いと思います。契約前に次の点を確認しておくと安心です。\n\n"
            "1. **初期費用の内訳**：敷金・礼金・仲介手数料・保証会社の費用・鍵交換代\n"
            "2. **更新料と更新の条件**：2年ごとの更新料が家賃の何か月分か\n"
            "3. **退去時の原状回復**：クリーニング代が特約で決まっていないか\n"
            "4. **ハザードマップ**：大田区のハザードマップで浸水想定区域に入っていないか\n"
            "5. **騒音と日当たり**：夜と朝、それぞれの時間帯の様子\n"
            "6. **ゴミ出しのルール**と、建物の管理状態（共用部の清掃など）\n\n"
            "特に4は、蒲田周辺では物件ごとに差があるので、住所で確認することをおすすめします。",
            31,
        ),
        Turn(
            "user",
            "ハザードマップを確認したら、候補の物件は浸水想定区域の外でした。2階の角部屋で"
            "日当たりも良かったので、その部屋に決めます。入居は3月23日の予定です。",
            2 * 86400 + 1800,
        ),
        Turn(
            "assistant",
            "良い部屋が見つかってよかったですね。3月23日の入居に向けて、ざっくりした段取りは"
            "次のとおりです。\n\n"
            "- **3週間前**：引っ越し業者の見積もり（3月下旬は繁忙期なので早めに）\n"
            "- **2週間前**：電気・ガス・水道・インターネットの手続き\n"
            "- **1週間前**：転出届、郵便の転送届\n"
            "- **入居後14日以内**：大田区での転入届、マイナンバーカードの住所変更\n\n"
            "ネット回線は開通工事に時間がかかることがあるので、いちばん先に申し込むのが安全です。",
            22,
        ),
    ],
)

BUDGET_DB = Chat(
    slug="budget-db",
    title="家計簿アプリの選定: データベースに PostgreSQL を選んだ理由",
    start=_epoch(2024, 5, 12, 12, 40),
    model="gpt-4o",
    new_style=False,
    turns=[
        Turn(
            "user",
            "個人で家計簿アプリを作っています。バックエンドは FastAPI で、最初は SQLite で"
            "始めたのですが、妻と二人で使うことになったのでデータベースを見直したいです。"
            "SQLite、MySQL、PostgreSQL のどれがいいでしょうか。サーバーは自宅の小さな NUC です。",
            0,
        ),
        Turn(
            "assistant",
            "二人で使う家計簿アプリという前提で、3つを比べます。\n\n"
            "| | SQLite | MySQL | PostgreSQL |\n"
            "|---|---|---|---|\n"
            "| 導入の手軽さ | ◎ ファイル1つ | ○ | ○ |\n"
            "| 同時書き込み | △ 書き込みはデータベース全体でロック | ◎ | ◎ |\n"
            "| JSON の扱い | △ JSON関数はあるが型はない | ○ JSON型 | ◎ JSONB とインデックス |\n"
            "| 運用 | ◎ ほぼ不要 | ○ | ○ |\n\n"
            "二人程度の同時利用なら、実は SQLite（WALモード）でも困らないことが多いです。"
            "ただ、レシートの明細のような半構造化データを扱いたい、将来スマホアプリからも"
            "同時に書き込みたい、といった予定があるなら PostgreSQL が無難です。NUC でも"
            "メモリ 1GB 程度あれば十分動きます。",
            38,
        ),
        Turn(
            "user",
            "検討した結果、データベースは PostgreSQL にします。理由は三つあります。一つ目は、"
            "レシートの明細を JSONB でそのまま保存して、あとから中身で検索できること。二つ目は、"
            "二人が同時に入力しても書き込みロックを気にしなくていいこと。三つ目は、仕事でも"
            "PostgreSQL を使っているので運用に慣れていることです。MySQL も悪くないですが、"
            "JSON まわりの使い勝手で PostgreSQL を選びました。SQLite からの移行はどう進めれば"
            "いいですか？",
            1420,
        ),
        Turn(
            "assistant",
            "納得感のある選び方だと思います。SQLite からの移行は次の順で進めるのが安全です。\n\n"
            "1. **スキーマを Alembic で管理する**：まだなら、現在のモデルから初期マイグレーションを"
            "作ります\n"
            "2. **PostgreSQL 側にスキーマを作る**：`alembic upgrade head`\n"
            "3. **データを移す**：`pgloader` を使うと、SQLite から型を変換しながらコピーできます\n"
            "4. **明細カラムを JSONB に変える**：`ALTER TABLE receipts ALTER COLUMN items TYPE "
            "jsonb USING items::jsonb;`\n"
            "5. **GIN インデックスを張る**：`CREATE INDEX ON receipts USING gin (items);`\n"
            "6. **接続文字列を切り替えて動作確認**\n\n"
            "移行前に SQLite のファイルをコピーしておけば、いつでも元に戻せます。",
            41,
        ),
        Turn(
            "user",
            "バックアップは pg_dump を毎晩 cron で回して、NAS にコピーすることに決めました。"
            "データは数百MB程度なので、それで十分だと思っています。",
            86400 + 600,
        ),
        Turn(
            "assistant",
            "その規模なら毎晩の pg_dump で十分です。一点だけ、バックアップは「戻せること」を"
            "確かめて初めて意味があるので、月に一度くらい、別のデータベースに `pg_restore` して"
            "件数を確認するテストをおすすめします。`-Fc`（カスタム形式）で取っておくと、"
            "テーブル単位の復元もできて便利です。",
            19,
        ),
    ],
)

ENGLISH = Chat(
    slug="english-study",
    title="英語学習の方法",
    start=_epoch(2024, 8, 3, 22, 5),
    model="gpt-4o",
    new_style=False,
    turns=[
        Turn(
            "user",
            "来年の春に海外のカンファレンスで発表することになりました。英語は読むのはなんとか"
            "なるのですが、話すのと聞き取りが苦手です。平日は1日1時間くらいしか取れません。"
            "どんな勉強方法がいいでしょうか？",
            0,
        ),
        Turn(
            "assistant",
            "目的が「半年後に英語で発表する」とはっきりしているので、話す・聞く練習に時間を"
            "寄せるのがおすすめです。\n\n"
            "- **シャドーイング（毎日15〜30分）**：音声のすぐ後を追って声に出す。聞き取りと"
            "発音が同時に鍛えられます\n"
            "- **オンライン英会話（週2〜3回）**：講師に発表原稿を読んでもらったり、質疑応答の"
            "練習相手になってもらったりできます\n"
            "- **単語アプリ（スキマ時間）**：技術系の語彙はすでに読めるなら優先度は低めです\n"
            "- **自分の声を録音する**：発表練習を録音して聞き返すと、弱点がすぐわかります\n\n"
            "平日1時間なら、シャドーイング30分＋英会話または録音練習30分、という配分が"
            "続けやすいと思います。",
            34,
        ),
        Turn(
            "user",
            "2週間いろいろ試してみて、方法を決めました。毎朝の通勤電車で30分シャドーイングを"
            "して、週に2回オンライン英会話で、フリートークではなく発表の練習をしてもらいます。"
            "単語アプリはやめることにしました。理由は、単語は読むぶんには困っていないし、"
            "実際にやってみたら続かなかったからです。発表までの時間が限られているので、"
            "話す練習に集中したいです。",
            14 * 86400 + 900,
        ),
        Turn(
            "assistant",
            "試したうえでの判断なので、続けやすい計画だと思います。効果を上げるためのコツを"
            "いくつか挙げます。\n\n"
            "1. シャドーイングの教材は、**発表テーマに近い分野の講演**を選ぶ\n"
            "2. 英会話の講師には、毎回**想定質問を3つ**出してもらい、即答する練習をする\n"
            "3. 月に一度、発表全体を通しで録音して、前回と聞き比べる\n\n"
            "本番の1か月前からは、時間を計って通し練習を増やすと安心です。",
            27,
        ),
        Turn(
            "user",
            "教材は、自分の発表テーマに近い TED の講演を使うことにします。知らない話題だと"
            "集中できないので。",
            300,
        ),
        Turn(
            "assistant",
            "良いと思います。TED は書き起こし（Transcript）が付いているので、最初は文字を見ながら、"
            "慣れてきたら音声だけで追う、という段階の付け方もできます。",
            12,
        ),
    ],
)

LAPTOP = Chat(
    slug="laptop",
    title="Choosing a new laptop",
    start=_epoch(2024, 10, 27, 9, 30),
    model="gpt-4o",
    new_style=False,
    turns=[
        Turn(
            "user",
            "My 2017 MacBook Pro is finally dying. I mostly write Python, run Docker, and travel "
            "about once a month. Budget is around $1,500. I'm torn between a MacBook Air M3 with "
            "16 GB and a Framework Laptop 13 running Linux. What would you weigh?",
            0,
        ),
        Turn(
            "assistant",
            "Both are good fits, so it comes down to what you value most:\n\n"
            "**MacBook Air M3 (16 GB)**\n"
            "- Excellent battery life (often 12+ hours of real work) and no fan noise\n"
            "- Very good screen and speakers, light for travel\n"
            "- Docker runs inside a Linux VM, which costs some memory and file-sharing speed\n"
            "- Nothing is upgradeable: RAM and storage are fixed at purchase\n\n"
            "**Framework Laptop 13 (Linux)**\n"
            "- Native Linux, so Docker runs without a VM layer\n"
            "- Repairable and upgradeable: battery, RAM, SSD, ports, even the mainboard\n"
            "- Battery life is noticeably shorter (roughly 6-9 hours depending on load)\n"
            "- Slightly more setup time, and some fiddling with sleep and power settings\n\n"
            "If your work mostly ends up on Linux servers and you care about longevity, the "
            "Framework is the more natural fit. If battery life and zero maintenance matter more, "
            "the Air is hard to beat.",
            29,
        ),
        Turn(
            "user",
            "I decided to go with the Framework 13. The main reason is that I want to run Linux "
            "natively, because almost everything I build ends up in Docker containers on Linux "
            "servers anyway, and I'm tired of the VM layer on macOS. I also like that I can "
            "replace the battery and upgrade the RAM myself, because the reason I'm replacing "
            "this MacBook is basically a swollen battery. Battery life is worse than the Air, "
            "but I can live with that since I'm rarely away from a plug for a whole day.",
            2 * 86400 + 5400,
        ),
        Turn(
            "assistant",
            "That reasoning holds up well. A few configuration tips:\n\n"
            "- **CPU**: the AMD Ryzen 7 7840U version runs cooler and has better integrated "
            "graphics than the comparable Intel model\n"
            "- **RAM**: 32 GB (2 x 16 GB) leaves room for several containers plus a browser; "
            "dual-channel matters for the integrated GPU\n"
            "- **Distro**: Fedora and Ubuntu LTS are the officially tested ones\n"
            "- **Power**: enable `power-profiles-daemon` and check that suspend works before "
            "your first trip",
            33,
        ),
        Turn(
            "user",
            "I'll get the AMD version with 32 GB of RAM and put Fedora on it, because Fedora "
            "seems to be the distro Framework tests best and it ships newer kernels.",
            600,
        ),
        Turn(
            "assistant",
            "Sounds like a solid setup. Once it arrives, run `fwupdmgr update` to get the latest "
            "firmware, then check battery drain overnight in suspend so you know what to expect "
            "when travelling.",
            14,
        ),
    ],
)

JOB_CHANGE = Chat(
    slug="job-change",
    title="転職の判断",
    start=_epoch(2025, 1, 19, 13, 15),
    model="gpt-4o",
    custom_instructions=(CUSTOM_PROFILE, CUSTOM_INSTRUCTIONS),
    turns=[
        Turn(
            "user",
            "今の会社（受託開発、社員80人）で5年目のバックエンドエンジニアです。自社サービスの"
            "会社から内定をもらいました。年収は今より60万円上がりますが、フルリモートから週3"
            "出社になります。判断の軸を整理したいです。",
            0,
        ),
        Turn(
            "assistant",
            "判断の軸を整理すると、次の5つになります。\n\n"
            "- **仕事の中身**：受託と自社サービスでは、リリース後に関われる期間が大きく違う\n"
            "- **働き方**：フルリモートから週3出社への変化。通勤時間と家庭への影響\n"
            "- **年収**：+60万円。ただし通勤の時間的コストも考える\n"
            "- **成長**：自社サービスでは運用・改善の経験、受託では多様な技術に触れる経験\n"
            "- **安定性**：内定先の事業の状況、チームの雰囲気\n\n"
            "それぞれについて「今の会社に残った場合」と「転職した場合」を書き出して、"
            "自分にとっていちばん重い軸がどれかを決めると、迷いが減ります。",
            36,
        ),
        Turn(
            "user",
            "妻とも話し合って、転職することに決めました。理由は、受託だとリリースしたあとの"
            "サービスの成長に関われないのがずっと不満だったことと、内定先では自分で設計した"
            "ものを長く運用できるからです。週3出社は通勤が片道40分なので許容範囲だと判断"
            "しました。年収が上がるのはおまけくらいに考えています。",
            3 * 86400 + 7200,
        ),
        Turn(
            "assistant",
            "いちばん重い軸がはっきりしているので、後悔の少ない判断だと思います。\n\n"
            "- 退職の意思は、まず直属の上司に口頭で伝える\n"
            "- 就業規則で退職の申し出期限（1か月前など）を確認する\n"
            "- 引き継ぎ資料を早めに作り、担当案件の状況を一覧にしておく\n"
            "- 有給休暇の残日数を確認し、消化の予定を上司と相談する",
            24,
        ),
        Turn(
            "user",
            "退職日は3月末にして、残っている有給12日は最後にまとめて消化することにします。"
            "引き継ぎ資料は2月中に作ります。",
            900,
        ),
        Turn(
            "assistant",
            "現実的なスケジュールです。有給を最後にまとめる場合、最終出社日は3月中旬になるので、"
            "引き継ぎの相手との打ち合わせはそれまでに終えられるように予定を組んでおきましょう。",
            17,
        ),
    ],
)

FLATTEN = Chat(
    slug="flatten",
    title="Flatten nested list function",
    start=_epoch(2025, 2, 8, 7, 48),
    model="gpt-4o",
    turns=[
        Turn(
            "user",
            "Write me a python function that flattens an arbitrarily nested list.",
            0,
        ),
        Turn(
            "assistant",
            "```python\n"
            "from collections.abc import Iterable, Iterator\n"
            "\n"
            "\n"
            "def flatten(items: Iterable) -> Iterator:\n"
            "    for item in items:\n"
            "        if isinstance(item, Iterable) and not isinstance(item, (str, bytes)):\n"
            "            yield from flatten(item)\n"
            "        else:\n"
            "            yield item\n"
            "\n"
            "\n"
            "print(list(flatten([1, [2, [3, [4]], 5], 6])))  # [1, 2, 3, 4, 5, 6]\n"
            "```",
            9,
        ),
    ],
)

HEROKU = Chat(
    slug="heroku-fly",
    title="Moving side project from Heroku to Fly.io",
    start=_epoch(2025, 4, 6, 0, 20),
    model="gpt-4o",
    turns=[
        Turn(
            "user",
            "I run a small side project on Heroku: a Rails app that sends weekly reading digests "
            "to about 300 users. I pay roughly $32 a month for an Eco dyno, Basic Postgres and a "
            "Scheduler worker. I'm thinking about moving it to Fly.io. What would the migration "
            "involve?",
            0,
        ),
        Turn(
            "assistant",
            "For an app that size the migration is manageable. The main steps:\n\n"
            "1. **Containerise**: `fly launch` detects Rails and generates a Dockerfile and "
            "`fly.toml`\n"
            "2. **Database**: create a Postgres cluster (`fly postgres create`) or use a managed "
            "provider, then move the data with `pg_dump` / `pg_restore`\n"
            "3. **Secrets**: copy the Heroku config vars with `fly secrets set`\n"
            "4. **Scheduled jobs**: replace Heroku Scheduler with a scheduled Machine or a cron "
            "process in `fly.toml`\n"
            "5. **Cutover**: put Heroku in maintenance mode, take a final dump, restore, switch "
            "DNS\n\n"
            "Things to check first: where your users are (Fly lets you pick regions), and whether "
            "you rely on any Heroku add-ons without a direct equivalent.",
            31,
        ),
        Turn(
            "user",
            "OK, I decided to move it to Fly.io. The reasons: most of my users are in Japan and "
            "Fly lets me run the app in the Tokyo region (nrt), which should cut latency a lot, "
            "and with a shared-cpu-1x machine plus a small Postgres the bill should be about half "
            "of what I pay now. I'm keeping the domain and email where they are; only the app and "
            "the database move.",
            86400 + 1200,
        ),
        Turn(
            "assistant",
            "That's a sensible scope. A plan that keeps the risk low:\n\n"
            "- Deploy to Fly in `nrt` first with a copy of the database and test everything on "
            "the `*.fly.dev` hostname\n"
            "- Lower the DNS TTL to 300 seconds a day before the cutover\n"
            "- On cutover day: maintenance mode on Heroku, final `pg_dump`, restore on Fly, "
            "switch DNS, watch the logs with `fly logs`\n"
            "- Keep the Heroku app and its database for a while so you can roll back",
            28,
        ),
        Turn(
            "user",
            "I'll do the cutover on a Saturday morning JST, because that's when traffic is "
            "lowest, and I'll keep the Heroku app in maintenance mode for two weeks before "
            "deleting it, in case I need to roll back.",
            420,
        ),
        Turn(
            "assistant",
            "Good plan. Two weeks also covers two digest cycles, so you'll see the scheduled job "
            "run on Fly twice before you remove the fallback.",
            11,
        ),
    ],
)

BACKUP = Chat(
    slug="home-backup",
    title="自宅のバックアップ方法を決める",
    start=_epoch(2025, 7, 13, 11, 2),
    model="gpt-4o",
    turns=[
        Turn(
            "user",
            "家族の写真と書類のバックアップ方法を見直したいです。今は外付けHDD 1台に手動で"
            "コピーしているだけです。写真は約800GBあります。",
            0,
        ),
        Turn(
            "assistant",
            "今の方法だと、HDD が壊れたり、火事や盗難にあったりするとデータを失う可能性が"
            "あります。よく使われる考え方は **3-2-1 ルール** です。\n\n"
            "- データのコピーを **3つ** 持つ\n"
            "- **2種類** の異なる媒体に保存する\n"
            "- そのうち **1つ** は自宅以外に置く\n\n"
            "具体的な選択肢:\n"
            "1. **クラウドの写真サービス**（Google フォト、iCloud 写真）：手軽だが、800GB だと"
            "有料プランが必要\n"
            "2. **オブジェクトストレージ**（Backblaze B2 など）＋バックアップツール（restic など）："
            "安価で暗号化もできるが、最初の設定が少し必要\n"
            "3. **NAS**：自宅内の冗長化には良いが、それだけでは自宅外のコピーにならない",
            35,
        ),
        Turn(
            "user",
            "3-2-1 ルールに沿って、restic で外付けSSDと Backblaze B2 の二か所にバックアップ"
            "することにしました。Google フォトも考えましたが、容量の追加料金が毎年かかるのと、"
            "元の画質のまま家族全員の分をまとめて置いておきたかったのでやめました。B2 なら"
            "800GB で月に数ドル程度なので、続けられると思います。",
            86400 * 2 + 3000,
        ),
        Turn(
            "assistant",
            "良い構成です。restic を使うときのポイントです。\n\n"
            "- **リポジトリのパスワード**を失うと復元できないので、安全な場所に控えておく\n"
            "- systemd timer か cron で**毎日自動実行**する\n"
            "- `restic forget --keep-daily 7 --keep-weekly 4 --keep-monthly 12 --prune` で"
            "古いスナップショットを整理する\n"
            "- 数か月に一度、`restic restore` で**実際に復元できるか**を確認する",
            26,
        ),
        Turn(
            "user",
            "暗号化のパスワードは、パスワードマネージャーに入れるのに加えて、紙に書いて実家の"
            "金庫にも保管しておくことにします。",
            540,
        ),
        Turn(
            "assistant",
            "二重に控えておけば安心です。紙のほうには、リポジトリの場所（B2 のバケット名）も"
            "一緒に書いておくと、いざというときに家族でも復元の手がかりになります。",
            13,
        ),
    ],
)

CHATS = [MOVING, BUDGET_DB, ENGLISH, LAPTOP, JOB_CHANGE, FLATTEN, HEROKU, BACKUP]


def build_export() -> list[dict[str, Any]]:
    conversations = [build_conversation(chat) for chat in CHATS]
    conversations.sort(key=lambda c: c["update_time"], reverse=True)  # newest first, like ChatGPT
    return conversations


def main() -> None:
    OUT.write_text(json.dumps(build_export()), encoding="ascii")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes, {len(CHATS)} conversations)")


if __name__ == "__main__":
    main()
