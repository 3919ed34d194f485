#!/usr/bin/env bash
# 140 with store-loss = keep: the attachment runs on through the outage.
STORE_LOSS=keep exec bash "$(dirname "$0")/140-pg-store-loss.t"
