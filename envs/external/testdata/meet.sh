#!/bin/sh
# Concurrency probe: marks itself running in $DIR, counts the agents marked there, and either
# waits until $WANT are (meet) or leaves after a moment (count); reports the count as its reward.
mkdir "$DIR/$$"
n=$(ls "$DIR" | wc -l)
if [ "$1" = meet ]; then
  while [ "$(ls "$DIR" | wc -l)" -lt "$WANT" ]; do sleep 0.01; done
  n=$(ls "$DIR" | wc -l)
else
  sleep 0.05
  rmdir "$DIR/$$"
fi
echo "{\"reward\": $n}"
