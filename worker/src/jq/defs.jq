# jq's builtins where jaq's standard library defines them differently or not at all.
# These come after jaq's definitions and shadow them; jqjail's natives (jq/funs.rs) shadow
# jaq's natives. Written for jqjail from jq 1.6's documented behaviour (jq 1.7's where 1.6
# had a bug that 1.7 fixed: `limit(0; f)`, `nth` past the end, `.[] |= empty`).

# Paths
def del(f): delpaths([path(f)]);
def to_entries: [keys_unsorted[] as $k | {key: $k, value: .[$k]}];
def from_entries:
  map({(.key // .Key // .name // .Name): (if has("value") then .value else .Value end)})
  | add + {} // {};
def with_entries(f): to_entries | map(f) | from_entries;
def leaf_paths: paths(scalars);
def recurse_down: recurse;
def walk(f): def w: if type == "object" then map_values(w) elif type == "array" then map(w) else . end | f; w;
def getpath($p):
  if $p | type != "array" then error("Path must be specified as an array")
  else reduce $p[] as $k (.; .[$k]) end;

# Streams of [path, leaf] events
def tostream:
  path(def r: (.[]? | r), .; r) as $p
  | getpath($p)
  | if (type == "array" or type == "object") and length > 0
    then [$p + [keys_unsorted[-1]]]
    else [$p, .] end;
def fromstream(f):
  {x: null, e: false} as $init
  | foreach f as $ev ($init;
      if .e then $init else . end
      | if $ev | length == 2
        then setpath(["e"]; $ev[0] | length == 0) | setpath(["x"] + $ev[0]; $ev[1])
        else setpath(["e"]; $ev[0] | length == 1) end;
      if .e then .x else empty end);
def truncate_stream(stream): . as $n | null | stream | select(.[0] | length > $n) | .[0] |= .[$n:];

# Math: C's functions where jaq's definitions differ (jq's `gamma` is C's, the log of Γ).
def significand: _jqjail_significand;
def logb: _jqjail_logb;
def gamma: _jqjail_gamma;

# Two-argument math, C's: jq binds the last argument outermost (`[pow(1,2; 3,4)]` is
# `[1,8,1,16]`).
def pow(a; b): b as $b | a as $a | _jqjail_pow($a; $b);
def atan2(a; b): b as $b | a as $a | _jqjail_atan2($a; $b);
def fmod(a; b): b as $b | a as $a | _jqjail_fmod($a; $b);
def hypot(a; b): b as $b | a as $a | _jqjail_hypot($a; $b);
def copysign(a; b): b as $b | a as $a | _jqjail_copysign($a; $b);
def fdim(a; b): b as $b | a as $a | _jqjail_fdim($a; $b);
def fmax(a; b): b as $b | a as $a | _jqjail_fmax($a; $b);
def fmin(a; b): b as $b | a as $a | _jqjail_fmin($a; $b);
def nextafter(a; b): b as $b | a as $a | _jqjail_nextafter($a; $b);
def remainder(a; b): b as $b | a as $a | _jqjail_remainder($a; $b);
def ldexp(a; b): b as $b | a as $a | _jqjail_ldexp($a; $b);
def scalbln(a; b): b as $b | a as $a | _jqjail_scalbln($a; $b);
def scalb(a; b): b as $b | a as $a | _jqjail_scalb($a; $b);
def nexttoward(a; b): nextafter(a; b);
def drem(a; b): remainder(a; b);
def setpath(p; v): v as $v | p as $p | getpath($p) = $v;

# Generators
def last(f): reduce f as $x (null; $x);
# Sorting and grouping with jq's messages for what is not an array: jq maps `f` over the
# input first (so a scalar "Cannot iterate over …"), then compares input and keys.
def _jqjail_by(f; what): map([f]) as $k | error("\(_jqjail_describe) and \($k | _jqjail_describe) \(what)");
def sort: if type == "array" then _jaq_sort else error("\(_jqjail_describe) cannot be sorted, as it is not an array") end;
# jq computes `f` of a lone element too (jaq's sort needs no key for it).
def sort_by(f):
  if type != "array" then _jqjail_by(f; "cannot be sorted, as they are not both arrays")
  elif length == 1 then (.[0] | [f] | empty), .
  else _jaq_sort_by(f) end;
def group_by(f): if type == "array" then _jaq_group_by(f) else _jqjail_by(f; "cannot be sorted, as they are not both arrays") end;
def unique_by(f): [group_by(f)[] | .[0]];
def unique: unique_by(.);
def min_by(f): if type == "array" then reduce min_by_or_empty(f) as $x (null; $x) else _jqjail_by(f; "cannot be iterated over") end;
def max_by(f): if type == "array" then reduce max_by_or_empty(f) as $x (null; $x) else _jqjail_by(f; "cannot be iterated over") end;
def min: if type == "array" then min_by(.) else error("\(_jqjail_describe) and \(_jqjail_describe) cannot be iterated over") end;
def max: if type == "array" then max_by(.) else error("\(_jqjail_describe) and \(_jqjail_describe) cannot be iterated over") end;
def explode: if type == "string" then _jaq_explode else error("explode input must be a string") end;
def ascii_downcase: if type == "string" then _jaq_ascii_downcase else error("explode input must be a string") end;
def ascii_upcase: if type == "string" then _jaq_ascii_upcase else error("explode input must be a string") end;
def range($from; $upto; $by):
  if ($from | type) != "number" or ($upto | type) != "number" or ($by | type) != "number"
  then error("Range bounds must be numeric")
  elif $by == 0 then empty
  else _jqjail_range($from; $upto; $by) end;
# jaq's range/2 and range/1 call its native directly, which counts on past a bound that is
# not a number (`range(0; null)` never ended).
def range($from; $upto): range($from; $upto; 1);
def range($upto): range(0; $upto);
def combinations:
  if length == 0 then [] else .[0][] as $x | (.[1:] | combinations) as $w | [$x] + $w end;
def combinations(n): . as $dot | [range(n)] | map($dot) | combinations;
def limit($n; f): if $n > 0 then _jaq_limit($n; f) elif $n == 0 then empty else f end;
def nth($n; f): if $n < 0 then error("nth doesn't support negative indices") else first(skip($n; f)) end;
def IN(s): . as $x | any(s; . == $x);
def IN(src; s): any(src | IN(s); .);
def INDEX(stream; idx_expr):
  reduce stream as $row ({}; .[$row | idx_expr | if type != "string" then tojson else . end] |= $row);
def INDEX(idx_expr): INDEX(.[]; idx_expr);
def JOIN($idx; idx_expr): [.[] | [., $idx[idx_expr]]];
def JOIN($idx; stream; idx_expr): stream | [., $idx[idx_expr]];
def JOIN($idx; stream; idx_expr; join_expr): stream | [., $idx[idx_expr]] | join_expr;

# Arrays and strings
def join($x):
  reduce .[] as $i (null;
    (if . == null then "" else . + $x end)
    + ($i | if type == "boolean" or type == "number" then tojson elif . == null then "" else . end))
  // "";
def flatten($d):
  if $d < 0 then error("flatten depth must not be negative")
  else reduce .[] as $i ([]; if $i | type == "array" and $d > 0 then . + ($i | flatten($d - 1)) else . + [$i] end) end;
def flatten: flatten(1e9);
def index($i): indices($i) | .[0];
def rindex($i): indices($i) | .[-1:][0];
# A string reverses as in jq 1.7; anything else as jq indexes it (`0 | reverse` is `[]`).
def reverse:
  if type == "array" then _jaq_reverse
  elif type == "string" then explode | _jaq_reverse | implode
  else [.[length - 1 - range(0; length)]] end;
def transpose:
  if . == [] then []
  else . as $in | (map(length) | max) as $max
    | [range(0; $max) as $j | [range(0; $in | length) as $i | $in[$i][$j]]]
  end;
def scalars_or_empty: select(type != "array" and type != "object" or length == 0);
# Dates: jq's messages for inputs that are not times
def _is_bdt: type == "array" and length >= 6 and all(.[:6][]; type == "number");
def mktime:
  if type != "array" then error("mktime requires array inputs")
  elif _is_bdt then _jaq_mktime
  else error("mktime requires parsed datetime inputs") end;
def gmtime: if type == "number" then _jaq_gmtime else error("gmtime() requires numeric inputs") end;
def strftime($f):
  if type == "number" or _is_bdt then _jaq_strftime($f)
  else error("strftime/1 requires parsed datetime inputs") end;
# After the checked definitions above, so that they are the ones these call.
def todate: strftime("%Y-%m-%dT%H:%M:%SZ");
def todateiso8601: todate;
def fromdateiso8601: strptime("%Y-%m-%dT%H:%M:%SZ") | mktime;
def fromdate: fromdateiso8601;

# Formats
def @uri: tostring | _jqjail_uri;

# What the sandbox leaves out, named
def input_line_number: error("input_line_number is not supported by jqjail: inputs are not read from a file");
def get_search_list: error("get_search_list is not supported by jqjail: modules are disabled");
def get_prog_origin: error("get_prog_origin is not supported by jqjail: modules are disabled");
def get_jq_origin: error("get_jq_origin is not supported by jqjail: modules are disabled");
def modulemeta: error("modulemeta is not supported by jqjail: modules are disabled");

# jq 1.6's binary search: its probes, so that an unsorted array gets jq's answer too.
def bsearch($target):
  if length == 0 then -1
  elif length == 1 then (if $target == .[0] then 0 elif $target < .[0] then -1 else -2 end)
  else . as $in
    | {lo: 0, hi: (length - 1), at: null}
    | until(.lo > .hi;
        if .at != null then .hi = -1
        else ((.lo + .hi) / 2 | floor) as $mid
          | $in[$mid] as $probe
          | if $probe == $target then .at = $mid
            elif .lo == .hi then .hi = -1
            elif $probe < $target then .lo = $mid + 1
            else .hi = $mid - 1
            end
        end)
    | if .at != null then .at
      elif $in[.lo] < $target then -2 - .lo
      else -1 - .lo
      end
  end;

def @base64d: _jqjail_base64d;

# `format("csv")` is `@csv`.
def format($f):
  if $f == "text" then @text elif $f == "json" then @json elif $f == "csv" then @csv
  elif $f == "tsv" then @tsv elif $f == "html" then @html elif $f == "uri" then @uri
  elif $f == "sh" then @sh elif $f == "base64" then @base64 elif $f == "base64d" then @base64d
  elif $f == "base32" then @base32
  elif $f | type == "string" then error("\($f) is not a valid format")
  else error("\($f | _jqjail_describe) is not a valid format") end;
