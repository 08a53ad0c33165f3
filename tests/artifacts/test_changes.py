"""What changed between two versions of a report, by its sections and figures."""

from artifacts.changes import FIGURES_SHOWN, SectionChange, changes_between

REPORT = """Heat pumps for the lab: a summary.

## Prices

A unit costs 1,200 EUR installed.

## Efficiency

A COP of 3.5 at 7 °C; 40 % of the heat from the air.

## Suppliers

Three suppliers answered.
"""


def test_the_same_report_has_no_changes():
    changes = changes_between(before=REPORT, after=REPORT)

    assert not changes
    assert (changes.added, changes.changed, changes.gone) == ([], [], [])


def test_a_section_added_is_named_by_its_heading():
    after = REPORT + "\n## Risks\n\nNoise at night.\n"

    changes = changes_between(before=REPORT, after=after)

    assert changes.added == ["Risks"]
    assert changes.changed == [] and changes.gone == []


def test_a_section_gone_is_named_by_its_heading():
    after = REPORT.replace("## Suppliers\n\nThree suppliers answered.\n", "")

    changes = changes_between(before=REPORT, after=after)

    assert changes.gone == ["Suppliers"]
    assert changes.added == [] and changes.changed == []


def test_a_changed_section_names_the_figures_that_came_and_went():
    after = REPORT.replace("1,200", "1,350").replace("40 %", "45 %")

    changes = changes_between(before=REPORT, after=after)

    assert changes.changed == [
        SectionChange(heading="Prices", figures_added=("1,350",), figures_gone=("1,200",)),
        SectionChange(heading="Efficiency", figures_added=("45%",), figures_gone=("40%",)),
    ]
    assert changes.added == [] and changes.gone == []


def test_a_section_whose_words_changed_but_not_its_figures_is_changed_without_figures():
    after = REPORT.replace("Three suppliers answered.", "Three suppliers answered; one declined to quote.")

    changes = changes_between(before=REPORT, after=after)

    assert changes.changed == [SectionChange(heading="Suppliers")]


def test_a_figure_moved_within_the_section_is_no_figure_changed():
    before = "## Prices\n\nA unit costs 1,200 EUR, the pipes 300 EUR.\n"
    after = "## Prices\n\nThe pipes cost 300 EUR and a unit 1,200 EUR.\n"

    assert changes_between(before=before, after=after).changed == [SectionChange(heading="Prices")]


def test_a_figure_repeated_once_more_counts_once():
    before = "## Prices\n\n1,200 EUR.\n"
    after = "## Prices\n\n1,200 EUR, and 1,200 EUR again for the second.\n"

    assert changes_between(before=before, after=after).changed == [
        SectionChange(heading="Prices", figures_added=("1,200",))
    ]


def test_whitespace_alone_is_no_change():
    after = (
        REPORT.replace("A unit costs 1,200 EUR installed.", "A unit   costs\n1,200 EUR installed.  ")
        .replace("## Efficiency", "##   Efficiency  ")
        .replace("\n", "\r\n")
        + "\n\n\n"
    )

    assert not changes_between(before=REPORT, after=after)


def test_a_headings_case_and_spacing_are_the_same_section():
    after = REPORT.replace("## Prices", "## PRICES").replace("1,200", "1,350")

    changes = changes_between(before=REPORT, after=after)

    assert changes.added == [] and changes.gone == []
    assert changes.changed == [SectionChange(heading="PRICES", figures_added=("1,350",), figures_gone=("1,200",))]


def test_the_text_before_the_first_heading_is_a_section_without_a_name():
    after = REPORT.replace("a summary.", "a summary, revised in 2025.")

    changes = changes_between(before=REPORT, after=after)

    assert changes.changed == [SectionChange(heading="", figures_added=("2025",))]
    # Added or gone, it is never named: it has no name.
    assert not changes_between(before="## A\n\nx\n", after="Intro.\n\n## A\n\nx\n").added


def test_repeated_headings_are_told_apart_by_their_order():
    before = "# Week 1\n\n## Notes\n\nCOP 3.1\n\n# Week 2\n\n## Notes\n\nCOP 3.2\n"
    after = "# Week 1\n\n## Notes\n\nCOP 3.1\n\n# Week 2\n\n## Notes\n\nCOP 3.4\n\n# Week 3\n\n## Notes\n\nCOP 3.6\n"

    changes = changes_between(before=before, after=after)

    # The second "Notes" changed, the first did not; the third is new.
    assert changes.changed == [SectionChange(heading="Notes", figures_added=("3.4",), figures_gone=("3.2",))]
    assert changes.added == ["Week 3", "Notes"]
    assert changes.gone == []


def test_a_repeated_heading_removed_is_gone_once():
    before = "## Notes\n\none\n\n## Notes\n\ntwo\n"
    after = "## Notes\n\none\n"

    changes = changes_between(before=before, after=after)

    assert changes.gone == ["Notes"] and changes.changed == [] and changes.added == []


REPORT_ZH = """# 热泵市场周报

## 价格

主流机型售价约12万元，安装费另计3,000元。

## 销量

本月销量1,200台，同比增长40%。

## 政策

补贴政策尚未公布。
"""


def test_chinese_sections_and_figures_are_named():
    after = (
        REPORT_ZH.replace("约12万元", "约15万元")
        .replace("增长40%", "增长45%")
        .replace("## 政策\n\n补贴政策尚未公布。\n", "## 风险\n\n冬季低温下效率下降。\n")
    )

    changes = changes_between(before=REPORT_ZH, after=after)

    assert changes.changed == [
        SectionChange(heading="价格", figures_added=("15万",), figures_gone=("12万",)),
        SectionChange(heading="销量", figures_added=("45%",), figures_gone=("40%",)),
    ]
    assert changes.added == ["风险"]
    assert changes.gone == ["政策"]


def test_chinese_figures_with_their_magnitude_and_full_width_percent():
    before = "## 规模\n\n市场规模：120亿，渗透率：8％。\n"
    after = "## 规模\n\n市场规模：150亿，渗透率：11％。\n"

    assert changes_between(before=before, after=after).changed == [
        SectionChange(heading="规模", figures_added=("150亿", "11％"), figures_gone=("120亿", "8％"))
    ]


def test_a_chinese_report_reflowed_is_no_change():
    after = REPORT_ZH.replace("售价约12万元，", "售价约12万元，\n").replace("## 销量", "##  销量 ")

    assert not changes_between(before=REPORT_ZH, after=after)


def test_list_markers_and_heading_levels_are_no_figures():
    before = "## Steps\n\n1. Survey the site\n2. Quote\n"
    after = "## Steps\n\n1. Survey the site\n2. Quote\n3. Install\n"

    assert changes_between(before=before, after=after).changed == [SectionChange(heading="Steps")]


def test_a_changed_section_names_a_few_figures_not_all():
    before = "## Prices\n\n" + ", ".join(str(n) for n in range(100, 110)) + "\n"
    after = "## Prices\n\n" + ", ".join(str(n) for n in range(200, 210)) + "\n"

    [change] = changes_between(before=before, after=after).changed

    assert change.figures_added == tuple(str(n) for n in range(200, 200 + FIGURES_SHOWN))
    assert change.figures_gone == tuple(str(n) for n in range(100, 100 + FIGURES_SHOWN))


def test_a_first_report_from_nothing_is_its_sections_added():
    changes = changes_between(before="", after=REPORT_ZH)

    assert changes.added == ["热泵市场周报", "价格", "销量", "政策"]
    assert changes.changed == [] and changes.gone == []


def test_numbers_inside_words_are_no_figures():
    before = "## Units\n\nThe X200 reaches COP3 in tests.\n"
    after = "## Units\n\nThe X300 reaches COP4 in tests.\n"

    assert changes_between(before=before, after=after).changed == [SectionChange(heading="Units")]


def test_a_word_after_a_number_is_no_unit_of_it():
    changes = changes_between(before="## Plan\n\nDone in 12 Months.\n", after="## Plan\n\nDone in 18 Months.\n")

    assert changes.changed[0].figures_added == ("18",) and changes.changed[0].figures_gone == ("12",)
