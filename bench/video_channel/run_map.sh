#!/bin/sh
# The video-channel map of 12d_calibration (issue 33 item 2): every point of bench/video_channel/explore_*.json at the small size,
# about 30 s a point on 2 cores (a point already in the JSON is not measured again), then the figure. Run from the repository root:
#   sh bench/video_channel/run_map.sh [WORK]        (default WORK: bench/video_channel)
#   FULL=1 sh bench/video_channel/run_map.sh        (also the full-size points: 8 to 16 min each, ~14 GB written and removed)
set -e
W=${1:-bench/video_channel}
E="python bench/explore_video_channel.py --work $W --raw-means 1 2 4 8 16"
# the Breakfast-like preset's calibration split
$E --knob anticipation_signal --values 0.25 0.5 1.0
$E --knob rank_signal --values 0 0.5 1 2
$E --knob relation_signal --values 0.5 1 2
$E --knob anticipation_signal --values 0 0.5 --set end_fade=0.7 frame_noise=1.8
$E --knob rank_signal --values 1 --set end_fade=0.6 frame_noise=2.0
$E --knob rank_signal --values 1 --set end_fade=0.7 frame_noise=1.6
# real-label mode: Breakfast's real annotations
$E --labels breakfast --knob rank_signal --values 0 1 2 4 8
$E --labels breakfast --knob anticipation_signal --values 0.25 0.5
$E --labels breakfast --knob rank_signal --values 0 1 --set end_fade=0.5
$E --labels breakfast --knob rank_signal --values 0 1 --set end_fade=0.7 frame_noise=3.0
$E --labels breakfast --knob rank_signal --values 0 --set end_fade=0.3
if [ "${FULL:-0}" = 1 ]; then
  F="python bench/explore_video_channel.py --work $W --size full --raw-means 0.5 1 2 4 8 16"
  $F --knob rank_signal --values 0 0.35 1
  $F --labels breakfast --knob rank_signal --values 0 0.5 0.65 1   # 0.5 and 0.65 were measured with --raw-means 0.5 1 1.5 2 3 4 and 0.5 1 2 3 4 5
  $F --labels breakfast --knob rank_signal --values 0.35 --raw-means 2 4 6 8
  for s in 2 3 4; do   # split 1 against the other three real splits (the experiments average over all four)
    $F --labels breakfast --knob rank_signal --values 0 0.5 --split $s --raw-means 2 4
    $F --labels breakfast --knob rank_signal --values 0.35 --split $s --raw-means 2 4 6 8
  done
  python bench/explore_video_channel.py --work $W --labels breakfast --size full --values --by-split 4
fi
python bench/explore_video_channel.py --work $W --figure figures/video_channel_map.png
