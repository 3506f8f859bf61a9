"""The App's controllers, each owned by the App (none a mixin): they do the
work (loading, tracing, compiling, reloading, judging names), decide what the
main screen says, and open the screens over it. Only the App and its
controllers import them."""
