# shellcheck shell=bash
# The median of a set of runs, for the bench scripts (they source this file from the repository
# root): the one definition of the figure their tables give beside every run.

# median_awk: an awk function, median(list), of a space-separated list of numbers: the middle one,
# the mean of the middle two for an even count, "" for an empty list. Put it before an awk program.
median_awk='
  function median(list,    n, a, i, j, t) {
    n = split(list, a, " ")
    if (n == 0) return ""
    for (i = 2; i <= n; ++i) for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; --j) {
      t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
    }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
'

# median: the median of the numbers on standard input, one per line; nothing when there are none.
median() { awk "$median_awk"'{ l = l " " $1 } END { m = median(l); if (m != "") print m }'; }
