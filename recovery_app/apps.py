from django.apps import AppConfig


class RecoveryAppConfig(AppConfig):
    name = "recovery_app"
    verbose_name = "Recovery"

    def ready(self) -> None:
        from journal_app.models import Journal
        from journal_app.signals import entries_appended
        from ledger_app.hooks import fold_recovery_register
        from recovery_app.fold import fold_recovery_prepare
        from recovery_app.receivers import index_appended

        entries_appended.connect(
            index_appended, sender=Journal, dispatch_uid="recovery_app.index_appended"
        )
        # every fold, whoever asks for it, scans for recovery triggers first (DESIGN.md 7)
        fold_recovery_register(fold_recovery_prepare)
