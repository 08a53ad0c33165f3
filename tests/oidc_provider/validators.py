import json
import os
from pathlib import Path

from oauth2_provider.oauth2_validators import OAuth2Validator


class GroupsValidator(OAuth2Validator):
    """Gives the ID token and userinfo the user's name, e-mail and groups. The
    groups are read from a JSON file ({username: [group, …]}) at each token,
    so a test changes them between two sign-ins; another ({username: {claim:
    value}}) replaces or adds claims, as a provider sending odd values would."""

    # Every claim below whatever the scopes (django-oauth-toolkit would drop "groups").
    oidc_claim_scope = None

    def get_additional_claims(self, request):
        user = request.user
        groups = json.loads(Path(os.environ["OIDC_PROVIDER_GROUPS_FILE"]).read_text())
        claims = json.loads(Path(os.environ["OIDC_PROVIDER_CLAIMS_FILE"]).read_text())
        return {
            "preferred_username": user.username,
            "email": user.email,
            "email_verified": True,
            "groups": groups.get(user.username, []),
            **claims.get(user.username, {}),
        }
