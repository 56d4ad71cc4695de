from django.apps import AppConfig


class RecoveryAppConfig(AppConfig):
    name = "recovery_app"
    verbose_name = "Recovery"
