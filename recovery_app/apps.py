from django.apps import AppConfig


class RecoveryAppConfig(AppConfig):
    name = "recovery_app"
    verbose_name = "Recovery"

    def ready(self) -> None:
        from journal_app.models import Journal
        from journal_app.signals import entries_appended
        from recovery_app.receivers import index_appended

        entries_appended.connect(
            index_appended, sender=Journal, dispatch_uid="recovery_app.index_appended"
        )
        from ledger_app.hooks import fold_runner_register
        from recovery_app.services import recovery_fold_result

        # every scheduled fold scans for recovery triggers first (DESIGN.md section 7)
        fold_runner_register(recovery_fold_result)
