from django.apps import AppConfig


class LedgerAppConfig(AppConfig):
    name = "ledger_app"
    verbose_name = "Ledger"

    def ready(self) -> None:
        from django.conf import settings

        from ledger_app.consequence import extend

        extend(getattr(settings, "LEDGER_CONSEQUENTIAL_PATTERNS", {}))
        from journal_app.hooks import transcript_import_register
        from journal_app.models import Journal
        from journal_app.signals import entries_appended
        from ledger_app.receivers import schedule_fold
        from ledger_app.services.reimport import transcript_import

        entries_appended.connect(
            schedule_fold, sender=Journal, dispatch_uid="ledger_app.schedule_fold"
        )
        # the upload API imports through the ledger's service (exports bring their ledger)
        transcript_import_register(transcript_import)
        from audit_app.chained_log import log_register
        from ledger_app.models import RetirementRequest

        # every request and decision in the tenant's hash-chained log (audit_app.LogRecord)
        log_register(RetirementRequest, "journal__session__tenant_id")
