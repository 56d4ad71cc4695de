# The production image: the built wheel installed into a virtual environment, run as an
# unprivileged user from /srv/ledgerkeep (not the source tree: the package carries its own
# templates, static files and data). docker-compose.yml runs it as web, worker, beat.
FROM python:3.11-slim AS build
WORKDIR /src
COPY . .
RUN pip install --no-cache-dir --upgrade pip \
 && pip wheel --no-cache-dir --no-deps --wheel-dir /dist .

FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 \
    PATH=/opt/venv/bin:$PATH \
    DJANGO_SETTINGS_MODULE=config.settings \
    LEDGERKEEP_DATA_DIR=/srv/ledgerkeep \
    STATIC_ROOT=/srv/ledgerkeep/static \
    MEDIA_ROOT=/data/media
COPY --from=build /dist /dist
RUN python -m venv /opt/venv \
 && pip install --no-cache-dir /dist/*.whl \
 && rm -rf /dist \
 && useradd --system --home-dir /srv/ledgerkeep --create-home ledgerkeep \
 && mkdir -p /data/media && chown ledgerkeep /data/media
USER ledgerkeep
WORKDIR /srv/ledgerkeep
# static files are collected at build time (whitenoise serves them); the check needs a key
RUN DJANGO_SECRET_KEY=build-only-not-used-at-run-time ledgerkeep collectstatic --noinput -v 0
EXPOSE 8000
# request limits, bind, workers: config/gunicorn.py (in the package)
CMD ["gunicorn", "-c", "python:config.gunicorn", "config.asgi:application"]
