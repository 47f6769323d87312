// The string formats a schema may ask for, as patterns run through regex.ts. Each generates a subset of what
// ajv-formats' full mode accepts (so outputs validate there): dates know month lengths and leap years, times have
// no leap second, e-mail domains have a dot, UUIDs are lowercase.
const DAY_31 = "(0[13578]|1[02])-(0[1-9]|[12]\\d|3[01])";
const DAY_30 = "(0[469]|11)-(0[1-9]|[12]\\d|30)";
const FEB = "02-(0[1-9]|1\\d|2[0-8])";
const LEAP_YEAR = "(\\d\\d(0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])00)";
const DATE = `(\\d{4}-(${DAY_31}|${DAY_30}|${FEB})|${LEAP_YEAR}-02-29)`;
const TIME = "([01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(\\.\\d{1,6})?(Z|[+-]([01]\\d|2[0-3]):[0-5]\\d)";
const ATEXT = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]";
const LABEL = "[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?"; // no leading or trailing hyphen; class stars keep masks fast
const OCTET = "(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)";

export const FORMATS: Record<string, string> = {
  date: `^${DATE}$`,
  time: `^${TIME}$`,
  "date-time": `^${DATE}T${TIME}$`,
  uuid: "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$",
  email: `^${ATEXT}+(\\.${ATEXT}+)*@${LABEL}(\\.${LABEL})+$`,
  ipv4: `^(${OCTET}\\.){3}${OCTET}$`,
};
