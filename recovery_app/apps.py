from django.apps import AppConfig


class RecoveryAppConfig(AppConfig):
    name = "recovery_app"
    verbose_name = "Recovery"

    def ready(self) -> None:
        from journal_app.hooks import transcript_import_register
        from journal_app.models import Journal
        from journal_app.signals import entries_appended
        from ledger_app.hooks import fold_recovery_register
        from recovery_app.fold import fold_recovery_prepare
        from recovery_app.receivers import index_appended
        from recovery_app.session_transfer import transcript_import

        entries_appended.connect(
            index_appended, sender=Journal, dispatch_uid="recovery_app.index_appended"
        )
        # every fold, whoever asks for it, scans for recovery triggers first (docs/design.md 7)
        fold_recovery_register(fold_recovery_prepare)
        # the upload API imports through the one import service: an export brings its ledger
        # and its receipts (recovery_app.session_transfer; docs/architecture.md, "Layers")
        transcript_import_register(transcript_import)
