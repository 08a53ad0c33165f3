"""A small OpenID provider (django-oauth-toolkit) that single sign-on is tested
against, run as a process of its own (tests.oidc_provider.process)."""
