# The two commands a newcomer needs: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000
# The suite runs in this many processes (pytest-xdist), each on a database, cache,
# Redis database and portals of its own (tests/settings.py); 0 runs it in this
# one, to debug with -x or --pdb: make test TEST_WORKERS=0 PYTEST_ARGS='-x tests/e2e'.
# Three on two cores: its tests wait on streams, pages and processes as well as
# compute, and three ran the suite in 0.93 of two's time on SQLite, 0.86 on Postgres.
TEST_WORKERS ?= 3

.PHONY: run test check screenshots lint install install-test bench clean messages

# The suite starts some forty Python processes that import the portal (portals,
# workers, shells) and two that import every test: each reads them compiled once
# (pytest's rewritten tests too), even where the environment says to write no
# bytecode (an empty value is unset to Python).
test check screenshots: export PYTHONDONTWRITEBYTECODE =

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

# Installs, migrates, prints the demo login (its password kept in data/ from
# run to run) and serves http://127.0.0.1:$(PORT) with daphne and a django-q2
# worker side by side; Ctrl-C stops both. The web process prints the address
# and login again once daphne listens, so they are not lost above its output.
run: export DEBUG ?= 1
run: install
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py collectstatic --noinput --verbosity 0
	$(BIN)/python manage.py library_samples
	$(BIN)/python manage.py demo_user --port $(PORT)
	$(BIN)/honcho start --port $(PORT)

# The linters, then the whole suite; with DATABASE_URL and REDIS_URL set it runs against them.
# A file's tests stay in one process (loadfile), so a module's portal starts once.
test: install-test lint
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# For the commit-by-commit loop: the linters, then every test that starts no
# process and no browser (the `processes` marker: tests/conftest.py). make test
# stays the whole suite, and CI's command.
check: install-test lint
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile -m "not processes" $(PYTEST_ARGS)

# The browser tests, each state they name saved as a screenshot under
# test-artifacts/screenshots/ to be looked at; make test saves only the pages of
# a browser test that failed.
screenshots: export ARTIFACTFLOW_SCREENSHOTS = 1
screenshots: install-test
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile tests/e2e tests/deploy $(PYTEST_ARGS)

lint: install-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache --no-logo

bench: install-test
	$(BIN)/pip install --quiet -e '.[test,bench]'
	$(BIN)/python benchmarks/run.py

# For developers who changed the interface's text: gathers every marked string
# into locale/zh_Hans/LC_MESSAGES/django.po (new ones untranslated, for you to
# translate) and compiles it to the django.mo that ships in git, so `make run`
# and `make test` need no gettext tools. This target does (apt install gettext);
# tests/artifactflow/test_i18n.py fails while the two disagree.
MESSAGES_IGNORE := --ignore=.venv --ignore=tests --ignore=benchmarks --ignore=data --ignore=deploy --ignore=docs
messages: install
	$(BIN)/python manage.py makemessages -l zh_Hans --no-obsolete $(MESSAGES_IGNORE)
	$(BIN)/python manage.py compilemessages -l zh_Hans $(MESSAGES_IGNORE)

clean:
	rm -rf $(VENV) data/cache data/static
