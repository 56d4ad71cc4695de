from django.urls import path

app_name = "journal"
urlpatterns: list = []
