"""Markdown from users and models, rendered to HTML that is safe to show."""

import nh3
from markdown_it import MarkdownIt

# js-default turns raw HTML off and refuses javascript:/data: links; nh3
# sanitises the output again, so a renderer bug cannot reach the page.
_md = MarkdownIt("js-default").enable("table").enable("strikethrough")


def markdown_render(text: str) -> str:
    return nh3.clean(_md.render(text), link_rel="noopener noreferrer nofollow")
