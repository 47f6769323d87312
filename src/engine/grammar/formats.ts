// The string formats a schema may ask for, as patterns run through regex.ts (null: any string). Each generates a
// subset of what ajv-formats' full mode accepts (so outputs validate there): dates know month lengths and leap
// years, times have no leap second, e-mail domains have a dot, UUIDs are lowercase, URIs have an authority and no
// percent-escapes, IPv6 addresses are lowercase with at most seven groups around a "::", host names are at most five
// labels of at most eleven letters or digits joined by "." or "-" (so no label passes 63 characters, nor the name
// 253). Repetitions stay class stars where they can: xgrammar computes masks inside `[…]*` fast, and every bounded
// repetition costs compile time and slower masks (regex.ts; hostname's are the costliest, BENCHMARKS.md "Grammar").
const DAY_31 = "(0[13578]|1[02])-(0[1-9]|[12]\\d|3[01])";
const DAY_30 = "(0[469]|11)-(0[1-9]|[12]\\d|30)";
const FEB = "02-(0[1-9]|1\\d|2[0-8])";
const LEAP_YEAR = "(\\d\\d(0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])00)";
const DATE = `(\\d{4}-(${DAY_31}|${DAY_30}|${FEB})|${LEAP_YEAR}-02-29)`;
const TIME = "([01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(\\.\\d{1,6})?(Z|[+-]([01]\\d|2[0-3]):[0-5]\\d)";
const ATEXT = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]";
const LABEL = "[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?"; // no leading or trailing hyphen; class stars keep masks fast
const OCTET = "(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)";
// RFC 3986 characters without "%" (so no escape sequences), for the authority and for path, query and fragment.
const REG_NAME = "[A-Za-z0-9._~!$&'()*+,;=-]+";
const PCHAR = "[A-Za-z0-9._~!$&'()*+,;=:@-]";
const QCHAR = "[A-Za-z0-9._~!$&'()*+,;=:@/?-]";
const AFTER_AUTHORITY = `(:\\d{1,5})?(/${PCHAR}*)*(\\?${QCHAR}*)?(#${QCHAR}*)?`;
const URI = `[A-Za-z][A-Za-z0-9+.-]*://${REG_NAME}${AFTER_AUTHORITY}`;
const URL_LABEL = "[a-z0-9]+(-[a-z0-9]+)*";
const HEX_GROUP = "[0-9a-f]{1,4}";

export const FORMATS: Record<string, string | null> = {
  date: `^${DATE}$`,
  time: `^${TIME}$`,
  "date-time": `^${DATE}T${TIME}$`,
  uuid: "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$",
  email: `^${ATEXT}+(\\.${ATEXT}+)*@${LABEL}(\\.${LABEL})+$`,
  ipv4: `^(${OCTET}\\.){3}${OCTET}$`,
  ipv6: `^(${HEX_GROUP}(:${HEX_GROUP}){7}|(${HEX_GROUP}(:${HEX_GROUP}){0,3})?::(${HEX_GROUP}(:${HEX_GROUP}){0,2})?)$`,
  hostname: "^[a-z0-9]{1,11}([.-][a-z0-9]{1,11}){0,4}$",
  uri: `^${URI}$`,
  "uri-reference": `^(${URI}|(/${PCHAR}*)+(\\?${QCHAR}*)?(#${QCHAR}*)?)$`,
  "uri-template": "^[^\\u0000-\\u0020\"'<>%\\\\^`{|}]*$",
  url: `^https?://${URL_LABEL}(\\.${URL_LABEL})*\\.[a-z][a-z]+(/\\S*)?$`,
  duration: "^P((\\d+Y)?(\\d+M)?\\d+D|\\d+W|T\\d+H(\\d+M)?(\\d+S)?)$",
  "iso-time": `^${TIME}$`,
  "iso-date-time": `^${DATE}T${TIME}$`,
  "json-pointer": "^(/[^~/]*)*$",
  "relative-json-pointer": "^(0|[1-9]\\d*)(#|(/[^~/]*)*)$",
  byte: "^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$",
  password: null,
  binary: null,
};
