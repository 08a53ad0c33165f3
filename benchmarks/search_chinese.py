"""Search over Chinese as fast as over English: one user with 40,000 Chinese
messages and another with the same number in English (the baseline), each
searched for a word that every 50th message holds and for one that none
does, through conversation_search and the library search the agents use.
Also what indexing costs: writing the 40,000 messages, whose Chinese text
passes through cjk_split on its way into the index."""

import random
import statistics
import time

from django.contrib.auth import get_user_model

from conversations.models import Conversation, Message
from conversations.search import conversation_search
from library.models import LibraryDocument
from library.selectors import library_search
from library.services import library_passages_index

MESSAGES = 40_000
PER_CONVERSATION = 100
LIBRARY_DOCUMENTS = 2_000
REQUESTS = 30

CHINESE = [
    "空气源热泵在冬季的运行成本比燃气锅炉低",
    "分布式光伏发电需要考虑屋顶的朝向和遮挡",
    "家用储能电池的循环寿命决定了度电成本",
    "数据库的预写日志让读者和写者可以同时工作",
    "检索增强生成把检索到的段落放进模型的提示词",
    "团队每周一上午讨论上周的研究进展",
    "这份报告的结论需要更多的数据来支持",
    "请把表格里的数字和原始来源核对一遍",
]
ENGLISH = [
    "Air source heat pumps cost less to run in winter than gas boilers",
    "Distributed solar needs the roof's orientation and shading considered",
    "The cycle life of a home battery decides the cost of each stored kilowatt hour",
    "A database's write-ahead log lets readers and a writer work at once",
    "Retrieval-augmented generation puts retrieved passages into the model's prompt",
    "The team discusses last week's research progress every Monday morning",
    "The conclusions of this report need more data to support them",
    "Please check the figures in the table against their original sources",
]
# (query, a sentence holding it, every 50th message has that sentence)
SEARCHES = {
    "Chinese": ("寒冷气候中的效率", "热泵在寒冷气候中的效率会下降", CHINESE, ["效率", "寒冷气候中的效率", "光合作用"]),
    "English": (
        "efficiency in cold",
        "Heat pump efficiency in cold climates drops",
        ENGLISH,
        ["efficiency", "efficiency in cold", "photosynthesis"],
    ),
}


def _messages(user, sentences: list[str], needle: str) -> float:
    """Writes the user's messages; the seconds it took."""
    rng = random.Random(7)
    conversations = Conversation.objects.bulk_create(
        Conversation(owner=user, title=rng.choice(sentences)) for _ in range(MESSAGES // PER_CONVERSATION)
    )
    messages = [
        Message(
            conversation=conversations[i // PER_CONVERSATION],
            content=rng.choice(sentences),
            response="。".join(rng.choice(sentences) for _ in range(6)) + ("。" + needle if i % 50 == 0 else ""),
        )
        for i in range(MESSAGES)
    ]
    started = time.perf_counter()
    Message.objects.bulk_create(messages, batch_size=1000)
    return time.perf_counter() - started


def _timed(search) -> float:
    search()
    times = []
    for _ in range(REQUESTS):
        started = time.perf_counter()
        search()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main():
    print(f"Search over {MESSAGES:,} messages a user, Chinese against English (median of {REQUESTS})")
    users = {language: get_user_model().objects.create_user(f"search-{language.lower()}") for language in SEARCHES}
    written = {}
    for language, (_, needle, sentences, _) in SEARCHES.items():
        written[language] = _messages(users[language], sentences, needle)
        rng = random.Random(11)
        documents = LibraryDocument.objects.bulk_create(
            LibraryDocument(title=rng.choice(sentences), content="。".join(rng.choice(sentences) for _ in range(40)))
            for _ in range(LIBRARY_DOCUMENTS // 2)
        )
        # bulk_create sends no post_save: cut them into passages as a save would.
        for document in documents:
            library_passages_index(document=document)
    print(
        f"  writing the messages: Chinese {written['Chinese']:.2f} s, English {written['English']:.2f} s "
        f"({written['Chinese'] / written['English']:.2f}x)"
    )

    english_queries = SEARCHES["English"][3]
    chinese_queries = SEARCHES["Chinese"][3]
    for chinese, english in zip(chinese_queries, english_queries, strict=True):
        zh = _timed(lambda q=chinese: conversation_search(user=users["Chinese"], query=q))
        en = _timed(lambda q=english: conversation_search(user=users["English"], query=q))
        found = len(conversation_search(user=users["Chinese"], query=chinese))
        print(
            f"  conversations “{chinese}” {zh * 1000:.2f} ms ({found} found) vs “{english}” {en * 1000:.2f} ms: {zh / en:.2f}x"
        )
    question_zh, question_en = SEARCHES["Chinese"][1], SEARCHES["English"][1]
    zh = _timed(lambda: library_search(query=question_zh, limit=5))
    en = _timed(lambda: library_search(query=question_en, limit=5))
    print(
        f"  library of {LIBRARY_DOCUMENTS:,} documents, a question: Chinese {zh * 1000:.2f} ms vs English {en * 1000:.2f} ms: {zh / en:.2f}x"
    )
