"""How well the library finds the passage that answers a question (issue 51):
recall@5 and MRR over a library built for it, searched as a whole document
per hit (the search before passages) and by passage (library_search now),
with the search's p50/p95.

The library: DOCUMENTS field reports on heat pump sites, half in English and
half in Chinese, each with the same eight sections (defrost, noise, warranty…) of a page or so
under headings of the same words, and each section a fact with its own number
between paragraphs every report shares. So the site's name in the title says
which document, and only the passage says where in it; as in a team's
library, where every report on a subject has the same outline.

The questions: QUESTIONS (half in Chinese), each about one section of one
site and naming the site, with the passage holding its fact as the answer.

- documents: the document holding the answer is among the first five hits
  (the rank of its first hit for MRR); a reader still has to find the passage
  in it, and the characters they read to do so are its length.
- passages: the answering passage is among the first five (its rank for MRR);
  the characters read are the hit's passage and those around it, as web_fetch
  gives them (agents.tools.web.PASSAGES_AROUND).
- passages + vectors (SQLite): the same, each passage also given a vector by
  the scripted embeddings server over HTTP (tests.embeddings_server) and the
  hits fused (library.vectors). Its vectors know that "loud" and "decibels"
  name one idea because it was written so: the figure shows the fusion at
  work on the questions whose words are not the passage's, not what a real
  model would score.

    python benchmarks/retrieval.py                       (also part of `make bench`)
    python benchmarks/retrieval.py --documents 10000     (search time at scale)
    DATABASE_URL=postgres://… REDIS_URL=redis://… python benchmarks/retrieval.py
"""

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

if __name__ == "__main__":
    from setup_django import setup

    setup()

from django.db import connection
from django.test import override_settings

from agents.tools.web import PASSAGES_AROUND
from library.models import LibraryDocument, LibraryPassage
from library.selectors import library_search, library_url_id, library_url_passage
from library.services import library_passages_index
from library.vectors import vectors_index
from tests.embeddings_server import MODEL, EmbeddingsServer

DOCUMENTS = 500
QUESTIONS = 100
K = 5
# Paragraphs before and after each fact: sections of a page or two.
PARAGRAPHS_AROUND = 3

# (heading, the fact with {site} and {n}, the question) per language.
SECTIONS = {
    "en": [
        (
            "Defrost",
            "The defrost cycle at {site} runs every {n} minutes below freezing.",
            "How often does the defrost cycle run at {site}?",
        ),
        ("Noise", "Noise measured one metre from the {site} unit was {n} decibels.", "How loud is the unit at {site}?"),
        (
            "Warranty",
            "The compressor warranty for {site} lasts {n} years.",
            "How long is the compressor warranty at {site}?",
        ),
        (
            "Refrigerant",
            "The {site} unit holds {n} kilograms of propane refrigerant.",
            "How much refrigerant does the {site} unit hold?",
        ),
        (
            "Installation",
            "Installing {site}, buffer tank included, took {n} hours.",
            "How many hours did the installation at {site} take?",
        ),
        (
            "Electricity",
            "Over the year {site} used {n} kilowatt-hours of electricity.",
            "How much electricity did {site} use in a year?",
        ),
        (
            "Maintenance",
            "The intake filter at {site} is cleaned every {n} weeks.",
            "How often is the intake filter cleaned at {site}?",
        ),
        (
            "Output",
            "Rated heating output at {site} is {n} kilowatts at seven degrees.",
            "What is the rated heating output at {site}?",
        ),
    ],
    "zh": [
        ("除霜", "{site}的机组在零度以下每{n}分钟除霜一次。", "{site}的机组多久除霜一次？"),
        ("噪声", "距{site}机组一米处测得噪声为{n}分贝。", "{site}机组的噪声有多大？"),
        ("质保", "{site}的压缩机质保期为{n}年。", "{site}的压缩机质保几年？"),
        ("冷媒", "{site}机组充注了{n}公斤丙烷冷媒。", "{site}机组充注了多少冷媒？"),
        ("安装", "{site}连同缓冲水箱安装共用了{n}小时。", "{site}安装用了多少小时？"),
        ("耗电", "{site}全年耗电{n}千瓦时。", "{site}全年耗电多少千瓦时？"),
        ("维护", "{site}的进风过滤网每{n}周清洗一次。", "{site}的过滤网多久清洗一次？"),
        ("出力", "{site}在七度工况下的额定制热量为{n}千瓦。", "{site}的额定制热量是多少？"),
    ],
}
# What every report says around its facts.
FILLER = {
    "en": [
        "The trial measured heat pumps in ordinary homes through a whole winter.",
        "Readings were taken every fifteen minutes and checked against the meter.",
        "The household kept its usual thermostat settings throughout the trial.",
        "Outdoor temperature, flow temperature and power were logged together.",
        "The installer's commissioning sheet was compared with the design figures.",
        "Residents were asked about comfort and noise at the end of each month.",
        "Data gaps of more than an hour were filled from the nearest weather station.",
        "The unit was sized from a room-by-room heat loss calculation.",
    ],
    "zh": [
        "试验在普通住宅中对热泵进行了整个冬季的测量。",
        "读数每十五分钟记录一次，并与电表核对。",
        "住户在试验期间保持了平常的温控设置。",
        "室外温度、供水温度和功率同时记录。",
        "安装人员的调试单与设计数据进行了比对。",
        "每月月底询问住户对舒适度和噪声的感受。",
        "超过一小时的数据缺口用最近气象站的数据补齐。",
        "机组按逐个房间的热负荷计算选型。",
    ],
}
SITE_NAMES = {
    "en": "Alder Birch Cedar Elm Hazel Juniper Larch Maple Oak Rowan Spruce Willow Aspen Beech Holly Yew".split(),
    "zh": list("临江 北塘 青山 南湖 东坡 西岭 石桥 白沙 金川 银滩 松岗 柳湾 枫林 竹溪 梅园 桃源".split()),
}


def _paragraph(rng: random.Random, language: str) -> str:
    joiner = "" if language == "zh" else " "
    return joiner.join(rng.sample(FILLER[language], 5))


def library_build(*, documents: int, seed: int = 51) -> list[dict]:
    """The reports, saved and cut into passages; for each, its site, language
    and the numbers of its facts by section."""
    rng = random.Random(seed)
    reports = []
    for index in range(documents):
        language = "zh" if index % 2 else "en"
        site = f"{rng.choice(SITE_NAMES[language])}{' ' if language == 'en' else ''}{1000 + index}"
        facts, body = {}, []
        for heading, fact, _question in SECTIONS[language]:
            facts[heading] = fact.format(site=site, n=rng.randint(2, 999))
            around = [_paragraph(rng, language) for _ in range(2 * PARAGRAPHS_AROUND)]
            body.append(
                f"## {heading}\n\n"
                + "\n\n".join([*around[:PARAGRAPHS_AROUND], facts[heading], *around[PARAGRAPHS_AROUND:]])
            )
        title = f"{site} heat pump field report" if language == "en" else f"{site}热泵现场报告"
        reports.append(
            {
                "title": title,
                "content": f"# {title}\n\n" + "\n\n".join(body),
                "site": site,
                "language": language,
                "facts": facts,
            }
        )
    saved = LibraryDocument.objects.bulk_create(
        (LibraryDocument(title=report["title"], content=report["content"]) for report in reports), batch_size=500
    )
    # bulk_create sends no post_save: cut them into passages as a save would.
    for report, document in zip(reports, saved, strict=True):
        library_passages_index(document=document)
        report["document"] = document
    return reports


def questions_pick(reports: list[dict], *, count: int, seed: int = 52) -> list[dict]:
    """`count` questions, every other one Chinese, each with its answer's document and passage."""
    rng = random.Random(seed)
    by_language = {language: [r for r in reports if r["language"] == language] for language in SECTIONS}
    questions = []
    for index in range(count):
        language = "zh" if index % 2 else "en"
        report = rng.choice(by_language[language])
        heading, _fact, question = rng.choice(SECTIONS[language])
        passage = next(
            p for p in LibraryPassage.objects.filter(document=report["document"]) if report["facts"][heading] in p.text
        )
        questions.append(
            {"question": question.format(site=report["site"]), "document": report["document"], "passage": passage}
        )
    return questions


def _rank(found: list, wanted) -> int | None:
    return next((place for place, item in enumerate(found, start=1) if item == wanted), None)


def _documents_search(question: str) -> list[int]:
    """The search before passages: the relevant documents best first (one
    hit each, as the library page lists them), read whole."""
    return [library_url_id(hit.url) for hit in library_search(query=question, limit=K, per_document=1)]


def _passages_search(question: str) -> list[tuple[int, int]]:
    return [(library_url_id(hit.url), library_url_passage(hit.url)) for hit in library_search(query=question, limit=K)]


def _read_around(question: dict) -> int:
    return sum(
        len(p.text)
        for p in LibraryPassage.objects.filter(
            document=question["document"],
            number__gte=question["passage"].number - PASSAGES_AROUND,
            number__lte=question["passage"].number + PASSAGES_AROUND,
        )
    )


def _with_vectors(questions: list[dict]) -> dict:
    """The passages' evaluation again, with every passage given its vector first."""
    server = EmbeddingsServer().start()
    try:
        with (
            tempfile.TemporaryDirectory() as directory,
            override_settings(
                EMBEDDINGS={"model": MODEL, "base_url": server.url, "api_key": "sk-bench", "timeout": 30.0},
                LIBRARY_VECTORS_PATH=Path(directory) / "vectors.sqlite3",
            ),
        ):
            started = time.perf_counter()
            while vectors_index().left:
                pass
            print(
                f"  vectors: {server.inputs:,} passages embedded in {len(server.requests)} requests "
                f"in {time.perf_counter() - started:.1f} s (scripted server, HTTP)"
            )
            return _evaluated(
                questions,
                search=_passages_search,
                wanted=lambda q: (q["document"].pk, q["passage"].number),
                read=_read_around,
            )
    finally:
        server.stop()


def _evaluated(questions: list[dict], *, search, wanted, read) -> dict:
    ranks, times, chars = {"en": [], "zh": []}, [], []
    for index, question in enumerate(questions):
        started = time.perf_counter()
        found = search(question["question"])
        times.append(time.perf_counter() - started)
        ranks["zh" if index % 2 else "en"].append(_rank(found, wanted(question)))
        chars.append(read(question))
    return {"ranks": ranks, "times": times, "chars": chars}


def evaluate(questions: list[dict]) -> dict[str, dict]:
    results = {}
    for name, search, wanted, read in (
        (
            "documents",
            _documents_search,
            lambda q: q["document"].pk,
            lambda q: len(q["document"].content),
        ),
        ("passages", _passages_search, lambda q: (q["document"].pk, q["passage"].number), _read_around),
    ):
        results[name] = _evaluated(questions, search=search, wanted=wanted, read=read)
    if connection.vendor == "sqlite":
        results["passages + vectors"] = _with_vectors(questions)
    return results


def _recall(ranks: list) -> float:
    return sum(rank is not None and rank <= K for rank in ranks) / len(ranks)


def _mrr(ranks: list) -> float:
    return sum(1 / rank for rank in ranks if rank) / len(ranks)


def main(documents: int = DOCUMENTS, questions: int = QUESTIONS) -> None:
    started = time.perf_counter()
    reports = library_build(documents=documents)
    built = time.perf_counter() - started
    asked = questions_pick(reports, count=questions)
    print(
        f"retrieval ({connection.vendor}): {documents:,} documents in "
        f"{LibraryPassage.objects.count():,} passages (built and indexed in {built:.1f} s), "
        f"{questions} questions, half in Chinese"
    )
    results = evaluate(asked)
    baseline = results["documents"]
    for name, result in results.items():
        every = result["ranks"]["en"] + result["ranks"]["zh"]
        times = sorted(result["times"])
        p95 = times[int(0.95 * (len(times) - 1))]
        print(
            f"  {name:18} recall@{K} {_recall(every):.2f} (en {_recall(result['ranks']['en']):.2f}, "
            f"zh {_recall(result['ranks']['zh']):.2f})  MRR {_mrr(every):.2f}  "
            f"search p50 {statistics.median(times) * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms  "
            f"characters read to reach the answer {statistics.mean(result['chars']):,.0f} "
            f"({statistics.mean(result['chars']) / statistics.mean(baseline['chars']):.2f}x)"
        )
    LibraryDocument.objects.filter(pk__in=[report["document"].pk for report in reports]).delete()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=DOCUMENTS)
    parser.add_argument("--questions", type=int, default=QUESTIONS)
    arguments = parser.parse_args()
    main(documents=arguments.documents, questions=arguments.questions)
