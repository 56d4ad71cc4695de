from django.apps import AppConfig


class LedgerAppConfig(AppConfig):
    name = "ledger_app"
    verbose_name = "Ledger"

    def ready(self) -> None:
        from django.conf import settings

        from ledger_app.consequence import extend

        extend(settings.LEDGER_CONSEQUENTIAL_PATTERNS or {})
        from journal_app.models import Journal
        from journal_app.signals import entries_appended
        from ledger_app.receivers import schedule_fold

        entries_appended.connect(
            schedule_fold, sender=Journal, dispatch_uid="ledger_app.schedule_fold"
        )
        from audit_app.chained_log import log_register
        from ledger_app.models import RetirementRequest

        # every request and decision in the tenant's hash-chained log (audit_app.LogRecord)
        log_register(RetirementRequest, "journal__session__tenant_id")
