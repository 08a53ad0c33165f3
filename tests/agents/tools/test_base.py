from agents.tools.base import source_data


def test_a_sources_title_is_one_line_that_hides_and_reorders_nothing():
    # A page's own <title>, shown in Activity: would read "潮汐表fdp.exe" with the override.
    source = source_data(title="潮汐表\u202epdf.exe\n\u2066第二行\u2069\u200b", url="https://example.org/", text="正文")

    assert source["title"] == "潮汐表pdf.exe 第二行"
