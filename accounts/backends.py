from django.contrib.auth.backends import ModelBackend


class StaffPasswordBackend(ModelBackend):
    """Passwords for staff only (ARTIFACTFLOW_LOCAL_PASSWORDS=staff): everyone
    else signs in through single sign-on, and a session a non-staff user
    opened with a password before ends."""

    def user_can_authenticate(self, user):
        return super().user_can_authenticate(user) and user.is_staff
