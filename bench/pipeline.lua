-- wrk script: send DEPTH pipelined requests per write (default 16), the classic TechEmpower
-- pipeline script. Usage: wrk -s bench/pipeline.lua URL -- [DEPTH]
-- Every request is wrk.format() of the URL's path; wrk counts each response it parses.

local req

init = function(args)
   local depth = tonumber(args[1]) or 16
   local r = {}
   for i = 1, depth do
      r[i] = wrk.format(nil, nil)
   end
   req = table.concat(r)
end

request = function()
   return req
end
