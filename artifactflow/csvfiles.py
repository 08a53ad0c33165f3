"""A table downloaded as CSV, as spreadsheets open it."""

import csv
from collections.abc import Iterable

from django.http import HttpResponse
from django.utils.http import content_disposition_header


def csv_response(*, filename: str, rows: Iterable[Iterable]) -> HttpResponse:
    """`rows` (the header first) as a CSV download called `filename`."""
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = content_disposition_header(True, filename)
    # A byte-order mark, so that a spreadsheet reads names in Chinese as UTF-8.
    response.write("\ufeff")
    csv.writer(response).writerows(rows)
    return response
