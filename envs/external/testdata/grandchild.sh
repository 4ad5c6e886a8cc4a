#!/bin/sh
# Starts a grandchild that would sleep for ever and writes "AGENT_PID GRANDCHILD_PID" to the FIFO
# $FIFO, then: wait (for the grandchild), exit (print a result and leave the grandchild running,
# holding stdout open) or stubborn (ignore SIGTERM, as does the grandchild, and wait).
[ "$1" = stubborn ] && trap '' TERM
sleep 1000 &
echo "$$ $!" > "$FIFO"
case "$1" in
exit) echo '{"reward": 1}' ;;
*) wait ;;
esac
