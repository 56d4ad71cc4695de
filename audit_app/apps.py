from django.apps import AppConfig


class AuditAppConfig(AppConfig):
    name = "audit_app"
    verbose_name = "Audit: comments, annotations, roles, audit log"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_migrate, post_save

        from audit_app import receivers
        from audit_app.chained_log import log_register
        from audit_app.models import Annotation, AuditEvent, Comment
        from journal_app.models import Membership

        for model in (AuditEvent, Comment, Annotation):
            log_register(model, "tenant_id")

        post_migrate.connect(receivers.ensure_roles, dispatch_uid="audit_app.ensure_roles")
        post_save.connect(
            receivers.membership_changed, sender=Membership, dispatch_uid="audit_app.member_saved"
        )
        post_delete.connect(
            receivers.membership_changed, sender=Membership, dispatch_uid="audit_app.member_gone"
        )
