from django.urls import path

app_name = "ledger"
urlpatterns: list = []
