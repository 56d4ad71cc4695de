from django.apps import AppConfig


class LedgerAppConfig(AppConfig):
    name = "ledger_app"
    verbose_name = "Ledger"

    def ready(self) -> None:
        from journal_app.models import Journal
        from journal_app.signals import entries_appended
        from ledger_app.receivers import schedule_fold

        entries_appended.connect(
            schedule_fold, sender=Journal, dispatch_uid="ledger_app.schedule_fold"
        )
