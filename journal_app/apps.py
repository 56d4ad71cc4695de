from django.apps import AppConfig


class JournalAppConfig(AppConfig):
    name = "journal_app"
    verbose_name = "Journal"
