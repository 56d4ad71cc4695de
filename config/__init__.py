"""Project settings package: settings, urls, the NinjaAPI, Celery app, WSGI."""

from config.celery import app as celery_app

__all__ = ["celery_app"]
